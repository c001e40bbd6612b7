package config

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// sameJSON compares JSON values; numbers as written, since probes.init
// keeps them verbatim.
func sameJSON(t testing.TB, a, b string) bool {
	decode := func(s string) any {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// FuzzLoad decodes arbitrary files: no panic, and what decodes survives
// Marshal and a second Parse with the same values and the same verdict
// from Validate.
func FuzzLoad(f *testing.F) {
	shipped, err := os.ReadFile(shippedConf)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(shipped)
	f.Add([]byte(`global = { log_level = "debug"; }; imdb = { max_tables_num = 5000L; }; junk = (1, 2);`))
	f.Add([]byte(`metric = { out_channel = "kafka"; kafka_topic = "t"; }; kafka = { kafka_broker = "k:1"; };`))
	f.Add([]byte(`galago = { host_path = "/host"; cmd_socket = "/tmp/s"; }; logs = { metric_dir = "/a;b"; };`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.conf", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.conf:") {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		verdict := c.Validate() == nil
		c2, err := Parse("marshalled", c.Marshal())
		if err != nil {
			t.Fatalf("Marshal output does not parse: %v\n%s", err, c.Marshal())
		}
		if !reflect.DeepEqual(values(c), values(c2)) {
			t.Fatalf("round trip changed values:\n%+v\n%+v", values(c), values(c2))
		}
		if (c2.Validate() == nil) != verdict {
			t.Fatalf("Validate verdict changed over the round trip")
		}
	})
}

// FuzzProbesInit: no panic; the good lines (even beside bad ones) write
// back to lines that parse to the same features and JSON values; and a save
// that applied nothing gives back the input line for line.
func FuzzProbesInit(f *testing.F) {
	shipped, err := os.ReadFile("../../testdata/probes.init")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(shipped)
	f.Add([]byte("tcp {\"cmd\":{\"probe\":[\"tcp_rtt\"]},\"snoopers\":{},\"state\":\"running\"}\n# c\n\nproc\t{ \"a\" : \"b\\u0020c\" }\r\n"))
	f.Add([]byte("0\v0 {} "))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, _ := ParseProbesInit(bytes.NewReader(data))
		var b bytes.Buffer
		if err := WriteProbesInit(&b, lines); err != nil {
			t.Fatalf("write of parsed lines: %v", err)
		}
		back, err := ParseProbesInit(&b)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, b.String())
		}
		if len(back) != len(lines) {
			t.Fatalf("%d lines back, %d written", len(back), len(lines))
		}
		for i := range lines {
			if back[i].Feature != lines[i].Feature || !sameJSON(t, back[i].JSON, lines[i].JSON) {
				t.Fatalf("line %d: %q back, %q written", i, back[i], lines[i])
			}
		}

		file, err := ReadProbesInit("fuzz", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		saved, _, err := file.Rewrite(nil, func(s string) string { return s })
		if err != nil {
			t.Fatal(err)
		}
		want := string(data)
		switch {
		case len(data) == 0:
			want = savedHeader
		case data[len(data)-1] != '\n':
			want += "\n"
		}
		if string(saved) != want {
			t.Fatalf("a save that applied nothing changed the file:\n%q\n%q", data, saved)
		}
	})
}
