package event

import (
	"bytes"
	"errors"
	"testing"
)

func split(line string) [][]byte {
	return bytes.Split([]byte(line), []byte{'|'})
}

func TestParseLog(t *testing.T) {
	l, err := ParseLog(split(`1700000000123| "WARN" |13|{"thread.pid": 12, "process.comm":"java"}|{"values":[{"event.name":"oncpu","duration":3.5}]}|"a | b"`))
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{
		`1700000000123`: string(l.Timestamp), `"WARN"`: string(l.SeverityText), `13`: string(l.SeverityNumber),
		`{"thread.pid":12,"process.comm":"java"}`:            string(l.Resource),
		`{"values":[{"event.name":"oncpu","duration":3.5}]}`: string(l.Attributes),
		`"a | b"`: string(l.Body),
	} {
		if got != name {
			t.Errorf("got %s, want %s", got, name)
		}
	}
	for _, bad := range []string{
		`1|"WARN"|13|{}|{}`,          // five fields
		`now|"WARN"|13|{}|{}|"b"`,    // timestamp not a number
		`"1"|"WARN"|13|{}|{}|"b"`,    // timestamp a string
		`1|WARN|13|{}|{}|"b"`,        // severity text not JSON
		`1|13|13|{}|{}|"b"`,          // severity text a number
		`1|"WARN"|"13"|{}|{}|"b"`,    // severity number a string
		`1|"WARN"|13|[]|{}|"b"`,      // resource not an object
		`1|"WARN"|13|{"a":1|{}|"b"`,  // resource cut
		`1|"WARN"|13|{}|{}|unquoted`, // body not JSON
		`1|"WARN"|13|{}||"b"`,        // empty attributes
	} {
		if _, err := ParseLog(split(bad)); !errors.Is(err, ErrBadLog) {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add(`1|"WARN"|13|{}|{}|"b"`)
	f.Add(`1700000000123|"INFO"|9|{"thread.pid":1}|{"values":[]}|"x|y"`)
	f.Fuzz(func(t *testing.T, line string) {
		l, err := ParseLog(split(line))
		if err != nil {
			return
		}
		if l.Resource[0] != '{' || l.SeverityText[0] != '"' {
			t.Errorf("accepted %q: %+v", line, l)
		}
	})
}
