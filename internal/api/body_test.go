package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
)

const form = "application/x-www-form-urlencoded"

func TestParseBody(t *testing.T) {
	tests := []struct {
		name, ctype, body string
		want              string // "" means errInvalidJSON
	}{
		{"curl -d", form, `json={"state":"running"}`, `{"state":"running"}`},
		{"curl -d keeps plus and percent", form, `json={"snoopers":{"proc_name":[{"comm":"^py.+%20"}]}}`,
			`{"snoopers":{"proc_name":[{"comm":"^py.+%20"}]}}`},
		{"curl --data-urlencode", form, "json=" + url.PathEscape(`{"state": "running"}`), `{"state": "running"}`},
		{"url-encoded with plus for space", form, "json=%7B%22state%22%3A+%22running%22%7D", `{"state": "running"}`},
		{"url-encoded but not a form", "application/json", "json=%7B%22state%22%3A%22running%22%7D", ""},
		{"url-encoded without content type", "", "json=%7B%22state%22%3A%22running%22%7D", ""},
		{"content type with charset", form + "; charset=utf-8", "json=%7B%7D", `{}`},
		{"two fields, json first", form, "json=%7B%22a%22%3A1%7D&x=y", `{"a":1}`},
		{"two fields, json second", form, "x=y&json=%7B%22a%22%3A1%7D", ""}, // must start with json=, as gala-gopher's
		{"plain JSON", "application/json", `{"state":"stopped"}`, `{"state":"stopped"}`},
		{"plain JSON any content type", form, "\n  {\"state\":\"stopped\"}\n", "\n  {\"state\":\"stopped\"}\n"},
		{"plain JSON array is not accepted", "application/json", `[1]`, ""},
		{"json= with a non-object passes through", form, `json=[1]`, `[1]`},
		{"line comment (jsoncpp)", form, "json={\"state\": \"running\" // optional\n}", "{\"state\": \"running\" \n}"},
		{"block comment", form, `json={/* c */"a":1}`, `{ "a":1}`},
		{"slashes in strings are not comments", form, `json={"p":"/var//log/*x*/"}`, `{"p":"/var//log/*x*/"}`},
		{"escaped quote in string", form, `json={"p":"a\"//b"}`, `{"p":"a\"//b"}`},
		{"unterminated block comment", form, `json={"a":1}/*`, ""},
		{"lone slash", form, `json={"a":1}/`, ""},
		{"malformed (gala-gopher sli doc)", form, `json={"snoopers":{"container_id":[{"container_id": "a","b"}]}}`, ""},
		{"empty", form, "", ""},
		{"json= alone", form, "json=", ""},
		{"other field", form, `config={"a":1}`, ""},
		{"JSON= is case sensitive", form, `JSON={"a":1}`, ""},
		{"trailing garbage", form, `json={"a":1}x`, ""},
		{"two values", form, `json={"a":1}{"b":2}`, ""},
		{"bad escape", form, "json=%zz", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBody(tt.ctype, []byte(tt.body))
			if tt.want == "" {
				if !errors.Is(err, errInvalidJSON) {
					t.Fatalf("parseBody(%q) = %q, %v; want errInvalidJSON", tt.body, got, err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("parseBody(%q) = %q, %v; want %q", tt.body, got, err, tt.want)
			}
		})
	}
}

func TestStripCommentsNoAlloc(t *testing.T) {
	in := []byte(`{"a":[1,2,3]}`)
	out, ok := stripComments(in)
	if !ok || &out[0] != &in[0] {
		t.Fatalf("stripComments copied a comment-free input")
	}
}

// FuzzParseBody checks that any accepted body yields one strict JSON value,
// that decoding never grows the input, and that the result read back as a
// curl -d body is itself.
func FuzzParseBody(f *testing.F) {
	f.Add(form, []byte(`json={"state":"running"}`))
	f.Add(form, []byte("json=%7B%22state%22%3A%22running%22%7D"))
	f.Add("application/json", []byte(`{"a":"//"} // c`))
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		got, err := parseBody(ctype, body)
		if err != nil {
			if !errors.Is(err, errInvalidJSON) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("parseBody(%q) = %q: not valid JSON", body, got)
		}
		if len(got) > len(body) {
			t.Fatalf("parseBody(%q) = %q: longer than the body", body, got)
		}
		again, err := parseBody("", append([]byte(formField), got...))
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("re-parsing %q gave %q, %v", got, again, err)
		}
		// A plain body without comments is passed on byte for byte.
		if !bytes.HasPrefix(body, []byte(formField)) && bytes.IndexByte(body, '/') < 0 && !bytes.Equal(got, body) {
			t.Fatalf("plain body %q altered to %q", body, got)
		}
	})
}
