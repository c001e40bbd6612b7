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

func TestBodyOffset(t *testing.T) {
	le := func(words ...uint32) []byte {
		var b []byte
		for _, w := range words {
			b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
		}
		return b
	}
	for _, c := range []struct {
		name, arch string
		code       []byte
		want       uint64
	}{
		// crypto/tls.(*Conn).Write, go1.26 -race: LEAQ -0xb8(SP), R12;
		// CMPQ R12, 0x10(R14); JBE morestack; PUSHQ BP.
		{"amd64 frame > 128", "amd64", []byte{0x4c, 0x8d, 0xa4, 0x24, 0x48, 0xff, 0xff, 0xff, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0x02, 0x0b, 0x00, 0x00, 0x55}, 18},
		// CMPQ SP, 0x10(R14); JBE .+0x40; PUSHQ BP.
		{"amd64 small frame", "amd64", []byte{0x49, 0x3b, 0x66, 0x10, 0x76, 0x40, 0x55}, 6},
		// NOSPLIT: PUSHQ BP; MOVQ SP, BP; ... no stack check.
		{"amd64 nosplit", "amd64", []byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x3b, 0x66, 0x10, 0xc3}, 0},
		// A compare with the stackguard not followed by a branch.
		{"amd64 no branch", "amd64", []byte{0x49, 0x3b, 0x66, 0x10, 0x55}, 0},
		// crypto/tls.(*Conn).Write, go1.26 arm64: MOVD 16(R28), R16;
		// SUB $80, RSP, R17; CMP R16, R17; BLS morestack; MOVD.W R30, -208(RSP).
		{"arm64", "arm64", le(0xf9400b90, 0xd10143f1, 0xeb10023f, 0x540033a9, 0xf8130ffe), 16},
		// MOVD.W R30, -208(RSP); ... no stack check.
		{"arm64 nosplit", "arm64", le(0xf8130ffe, 0xd10143f1, 0x540033a9), 0},
		{"unknown arch", "riscv64", []byte{1, 2, 3, 4}, 0},
	} {
		if got := bodyOffset(c.arch, c.code); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
