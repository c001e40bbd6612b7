package jmx

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

func decoder(t *testing.T, b []byte) *Decoder {
	t.Helper()
	d, err := NewDecoder(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDecodeJDK reads testdata/mixed-jdk17.ser, written by
// testdata/Ser.java on OpenJDK 17: block data with modified UTF-8, a
// shared object (a back reference), arrays, an enum, a TreeMap, an
// ArrayList, a long string, an exception object and a class.
func TestDecodeJDK(t *testing.T) {
	b, err := os.ReadFile("testdata/mixed-jdk17.ser")
	if err != nil {
		t.Fatal(err)
	}
	d := decoder(t, b)
	blk, err := d.ReadBlock(4)
	if err != nil || !bytes.Equal(blk, []byte{0, 0, 0, 7}) {
		t.Fatalf("writeInt(7): %x %v", blk, err)
	}
	n, _ := d.ReadBlock(2)
	utf, err := d.ReadBlock(int(n[0])<<8 | int(n[1]))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := decodeModifiedUTF8(utf); err != nil || s != "héllo\x00𝄞" {
		t.Errorf("writeUTF: %q %v", s, err)
	}
	next := func() any {
		t.Helper()
		v, err := d.ReadObject()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	l1, l2 := next(), next()
	if v, ok := Long(l1); !ok || v != -42 || l1 != l2 {
		t.Errorf("Long -42 twice, the second a reference: %v %v %p %p", v, ok, l1, l2)
	}
	if a, ok := next().(*Array); !ok || a.Class.Name != "[Ljava.lang.String;" || len(a.Elems) != 2 || a.Elems[1] != "bé" {
		t.Errorf("String[]: %+v", a)
	}
	if a, ok := next().(*Array); !ok || len(a.Elems) != 3 || a.Elems[1] != int32(-2) {
		t.Errorf("int[]: %+v", a)
	}
	if a, ok := next().(*Array); !ok || !bytes.Equal(a.Bytes, []byte{1, 2, 3, 4}) {
		t.Errorf("byte[]: %+v", a)
	}
	if e, ok := next().(*Enum); !ok || e.Name != "SECONDS" || e.Class.Name != "java.util.concurrent.TimeUnit" {
		t.Errorf("enum: %+v", e)
	}
	tm, ok := next().(*Object)
	if !ok || tm.Class.Name != "java.util.TreeMap" {
		t.Fatalf("TreeMap: %s", Describe(tm))
	}
	var keys []string
	for _, a := range tm.Annotation("java.util.TreeMap") {
		if s, ok := a.(string); ok {
			keys = append(keys, s)
		}
	}
	if strings.Join(keys, ",") != "max,n,used" {
		t.Errorf("TreeMap keys %q", keys)
	}
	al, ok := next().(*Object)
	if size, _ := al.Field("size"); !ok || size != int32(3) {
		t.Errorf("ArrayList size %v", size)
	}
	if ann := al.Annotation("java.util.ArrayList"); len(ann) != 4 { // capacity block, 3 elements
		t.Errorf("ArrayList data %d items", len(ann))
	} else if f, _ := ann[2].(*Object).Field("value"); f != 1.5 {
		t.Errorf("Double %v", f)
	}
	if s, ok := next().(string); !ok || len(s) != 70000 || s[26] != 'a' {
		t.Errorf("long string of %d", len(s))
	}
	if ex, ok := next().(*Object); !ok || Describe(ex) != "java.io.IOException: boom" {
		t.Errorf("exception: %s", Describe(ex))
	}
	if c, ok := next().(*ClassDesc); !ok || c.Name != "java.lang.String" {
		t.Errorf("class: %+v", c)
	}
	if _, err := d.ReadObject(); !errors.Is(err, ErrStream) {
		t.Errorf("past the end: %v", err)
	}
}

// TestEncodeObjectName: the encoder's ObjectName is the JDK's own
// (testdata/objectname-jdk17.ser) but for the codebase annotation RMI
// adds (a null).
func TestEncodeObjectName(t *testing.T) {
	jdk, err := os.ReadFile("testdata/objectname-jdk17.ser")
	if err != nil {
		t.Fatal(err)
	}
	e := NewEncoder()
	if err := e.ObjectName("java.nio:type=BufferPool,name=direct"); err != nil {
		t.Fatal(err)
	}
	got := e.Bytes()
	want := bytes.Replace(jdk, []byte{tcEndBlockData, tcNull, tcString}, []byte{tcNull, tcEndBlockData, tcNull, tcString}, 1)
	if !bytes.Equal(got, want) {
		t.Errorf("ObjectName\n%x\nJDK (+ null codebase)\n%x", got, want)
	}
	for _, bad := range []string{"", "nodomain", "java.nio:"} {
		if err := NewEncoder().ObjectName(bad); err == nil {
			t.Errorf("ObjectName %q accepted", bad)
		}
	}
}

// TestRoundTrip: what the encoder writes, the decoder reads back.
func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 70000)
	e := NewEncoder()
	e.Long(math.MinInt64)
	e.Int(-1)
	e.Short(7)
	e.Byte(9)
	e.Null()
	for _, s := range []string{"", "a\x00é𝄞", long} {
		if err := e.String(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.ObjectName("d:k=v"); err != nil {
		t.Fatal(err)
	}
	d := decoder(t, e.Bytes())
	if b, err := d.ReadBlock(15); err != nil || !bytes.Equal(b, []byte{0x80, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 7, 9}) {
		t.Errorf("block %x %v", b, err)
	}
	for _, want := range []any{nil, "", "a\x00é𝄞", long} {
		if v, err := d.ReadObject(); err != nil || v != want {
			t.Errorf("got %.20q %v, want %.20q", v, err, want)
		}
	}
	v, err := d.ReadObject()
	o, ok := v.(*Object)
	if err != nil || !ok || o.Class.Name != "javax.management.ObjectName" || len(o.Annotation(o.Class.Name)) != 1 || o.Annotation(o.Class.Name)[0] != "d:k=v" {
		t.Errorf("ObjectName: %s %v", Describe(v), err)
	}
}

// TestDecodeBounds: claims beyond the bytes there are fail before any
// allocation of their size; nesting and handles are capped.
func TestDecodeBounds(t *testing.T) {
	hdr := []byte{0xac, 0xed, 0, 5}
	deep := append([]byte{}, hdr...)
	for range 200 {
		deep = append(deep, tcArray, tcClassDesc, 0, 19)
		deep = append(deep, "[Ljava.lang.Object;"...)
		deep = append(deep, 0, 0, 0, 0, 0, 0, 0, 0, scSerializable, 0, 0, tcEndBlockData, tcNull, 0, 0, 0, 1)
	}
	for name, b := range map[string][]byte{
		"bad magic":      {0xac, 0xee, 0, 5},
		"long string":    append(append([]byte{}, hdr...), tcLongString, 0x7f, 0, 0, 0, 0, 0, 0, 0),
		"huge array":     append(append([]byte{}, hdr...), tcArray, tcClassDesc, 0, 2, '[', 'B', 0, 0, 0, 0, 0, 0, 0, 0, scSerializable, 0, 0, tcEndBlockData, tcNull, 0x7f, 0, 0, 0),
		"dangling ref":   append(append([]byte{}, hdr...), tcReference, 0, 0x7e, 0, 5),
		"deep":           deep,
		"unknown code":   append(append([]byte{}, hdr...), 0x42),
		"block at top":   append(append([]byte{}, hdr...), tcBlockData, 1, 0),
		"bad utf":        append(append([]byte{}, hdr...), tcString, 0, 1, 0xff),
		"negative block": append(append([]byte{}, hdr...), tcBlockDataLong, 0xff, 0xff, 0xff, 0xff),
	} {
		d, err := NewDecoder(bytes.NewReader(b), int64(len(b)))
		if err == nil {
			_, err = d.ReadObject()
			if err == nil {
				_, err = d.ReadBlock(1)
			}
		}
		if !errors.Is(err, ErrStream) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
