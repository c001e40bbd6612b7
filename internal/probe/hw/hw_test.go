package hw

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReadCarriers(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata")); err != nil {
		t.Fatal(err)
	}
	// A counter that does not parse is an error naming the file.
	_, err := readCarriers(root)
	if err == nil || !strings.Contains(err.Error(), filepath.Join("bad", "carrier_up_count")) {
		t.Fatalf("bad counter: err = %v, want one naming bad/carrier_up_count", err)
	}
	// An interface without the counters (kernel < 4.16) is skipped.
	if err := os.Remove(filepath.Join(root, "sys/class/net/bad/carrier_up_count")); err != nil {
		t.Fatal(err)
	}
	got, err := readCarriers(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []carrier{{dev: "eth0", driver: "virtio_net", up: 3, down: 2}, {dev: "lo"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func nicKey(dev string, queue int32, netns uint32) hwNicKey {
	k := hwNicKey{Queue: queue, Netns: netns}
	for i := range len(dev) {
		k.Dev[i] = int8(dev[i])
	}
	return k
}

func TestNames(t *testing.T) {
	if got := nicName(nicKey("eth0", 3, 100), 100); got != "eth0:3" {
		t.Errorf("host netns: %q", got)
	}
	if got := nicName(nicKey("eth0", 0, 200), 100); got != "eth0:0@netns:200" {
		t.Errorf("other netns: %q", got)
	}
	var k hwMcKey
	k.ErrType, k.McIndex, k.TopLayer, k.MidLayer = 1, 2, 0, -1
	copy(k.Label[:], []int8{'D', 'I', 'M', 'M', '0'})
	r := mcRecord(k, 4, time.Unix(100, 0), time.Second)
	for f, want := range map[string]string{"name": "mc2:0:-1:Uncorrected:DIMM0", "err_type": "Uncorrected", "label": "DIMM0", "mc_index": "2", "top_layer": "0", "mid_layer": "-1"} {
		if got := r.Str(f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if v := r.Values[r.Table.MustIndex("error_count")]; !v.Set || v.Num != 4 {
		t.Errorf("error_count = %+v, want 4", v)
	}
	for typ, want := range map[uint32]string{0: "Corrected", 1: "Uncorrected", 2: "Deferred", 3: "Fatal", 4: "Info", 9: "Info"} {
		if got := errTypeName(typ); got != want {
			t.Errorf("errTypeName(%d) = %q, want %q", typ, got, want)
		}
	}
}
