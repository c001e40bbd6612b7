package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
)

// errInvalidJSON is gala-gopher's answer to a body it cannot read as JSON.
var errInvalidJSON = errors.New("invalid json format")

const formField = "json="

// parseBody extracts the JSON configuration from a PUT body. It accepts:
//
//   - json=<JSON>, the JSON sent as is: what `curl -d json='{...}'` sends and
//     the only form gala-gopher reads;
//   - json=<url-encoded JSON>, what `curl --data-urlencode json='{...}'` sends
//     (gala-gopher's own documentation uses it, but gala-gopher does not
//     decode it). Decoding is tried only when the raw text is not JSON and
//     the Content-Type is application/x-www-form-urlencoded, because curl -d
//     sends that Content-Type too and its JSON may hold '+' or '%';
//   - a plain JSON object body ({...}), whatever its Content-Type.
//
// Comments (// and /* */) are removed, as gala-gopher's JSON parser (jsoncpp)
// skips them and its documentation's examples carry them. The result is
// strict JSON; anything else is errInvalidJSON followed by the reason.
func parseBody(contentType string, body []byte) ([]byte, error) {
	if rest, ok := bytes.CutPrefix(body, []byte(formField)); ok {
		j, reason := normalizeJSON(rest)
		if reason == nil {
			return j, nil
		}
		if !isForm(contentType) {
			return nil, invalidJSON(reason)
		}
		if dec, err := url.QueryUnescape(string(rest)); err == nil {
			j, decReason := normalizeJSON([]byte(dec))
			if decReason == nil {
				return j, nil
			}
			if dec != string(rest) {
				// The text was url-encoded: what is wrong is in its
				// decoded form.
				reason = decReason
			}
		}
		// Several fields (curl -d json=... -d x=y): take the first json.
		if vals, err := url.ParseQuery(string(body)); err == nil {
			if v, ok := vals["json"]; ok && len(v) > 0 {
				if j, err := normalizeJSON([]byte(v[0])); err == nil {
					return j, nil
				}
			}
		}
		return nil, invalidJSON(reason)
	}
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) > 0 && t[0] == '{' {
		j, reason := normalizeJSON(body)
		if reason == nil {
			return j, nil
		}
		return nil, invalidJSON(reason)
	}
	if len(t) == 0 {
		return nil, invalidJSON(errors.New("the body is empty"))
	}
	return nil, invalidJSON(errors.New(`the body must be json=<JSON> or a JSON object`))
}

func invalidJSON(reason error) error { return fmt.Errorf("%w: %w", errInvalidJSON, reason) }

func isForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// normalizeJSON strips comments and checks that the result is one valid
// JSON value; the error says what is wrong. Without comments the input is
// returned as is.
func normalizeJSON(b []byte) ([]byte, error) {
	s, ok := stripComments(b)
	if !ok {
		return nil, errors.New("unterminated /* comment or a lone '/'")
	}
	if len(bytes.TrimSpace(s)) == 0 {
		return nil, errors.New("the JSON is empty")
	}
	if !json.Valid(s) {
		var v any
		err := json.Unmarshal(s, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%w (at byte %d)", err, se.Offset)
		}
		if err == nil {
			err = errors.New("not one JSON value")
		}
		return nil, err
	}
	return s, nil
}

// stripComments removes // line comments and /* */ block comments outside
// JSON strings, the comments jsoncpp accepts. A '/' cannot otherwise occur
// outside a string in JSON, so the removal is unambiguous. A block comment
// becomes one space so it still separates tokens; a line comment keeps its
// newline. ok is false for an unterminated block comment or a lone '/'.
func stripComments(b []byte) (out []byte, ok bool) {
	if bytes.IndexByte(b, '/') < 0 {
		return b, true
	}
	out = make([]byte, 0, len(b))
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
			out = append(out, c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				return out, true
			}
			i += j - 1 // the newline itself is kept
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			j := bytes.Index(b[i+2:], []byte("*/"))
			if j < 0 {
				return nil, false
			}
			out = append(out, ' ')
			i += 2 + j + 1
		case c == '/':
			return nil, false
		default:
			out = append(out, c)
		}
	}
	return out, true
}
