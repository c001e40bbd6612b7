package syscap

import "testing"

func TestGoAtLeast(t *testing.T) {
	for v, want := range map[string]bool{
		"go1.17": true, "go1.16.15": false, "go1.26.8": true, "go1.21rc2": true, "go1.9": false,
		"go2.0": true, "devel go1.27-abc": true, "": false, "go1": false, "gox.y": false,
	} {
		if got := goAtLeast(v, 1, 17); got != want {
			t.Errorf("goAtLeast(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestRetOffsets(t *testing.T) {
	// amd64: mov %rsp,%rbp (3); ret (1); int3 (1); ret imm16 (3); nop (1)
	amd := []byte{0x48, 0x89, 0xe5, 0xc3, 0xcc, 0xc2, 0x08, 0x00, 0x90}
	got, err := retOffsets("amd64", amd)
	if err != nil || len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Errorf("amd64: %v %v", got, err)
	}
	// arm64: nop; ret; add x0, x0, #1; ret x1
	arm := []byte{0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6, 0x00, 0x04, 0x00, 0x91, 0x20, 0x00, 0x5f, 0xd6}
	got, err = retOffsets("arm64", arm)
	if err != nil || len(got) != 2 || got[0] != 4 || got[1] != 12 {
		t.Errorf("arm64: %v %v", got, err)
	}
	if _, err := retOffsets("riscv64", nil); err == nil {
		t.Error("unknown architecture accepted")
	}
}
