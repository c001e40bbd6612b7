package hotspot

import (
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	if out, err := readReply(strings.NewReader("0\nhello\n")); err != nil || out != "hello\n" {
		t.Errorf("%q %v", out, err)
	}
	if _, err := readReply(strings.NewReader("101\nNo such command\n")); err == nil || !strings.Contains(err.Error(), "No such command") {
		t.Errorf("error reply: %v", err)
	}
	if _, err := readReply(strings.NewReader("junk")); err == nil {
		t.Error("no result code accepted")
	}
	if got := string(request("jcmd", "GC.heap_info")); got != "1\x00jcmd\x00GC.heap_info\x00\x00\x00" {
		t.Errorf("request %q", got)
	}
}
