package logpattern

import (
	"strings"
	"unicode/utf8"
)

// Bounds on what is kept of a message.
const (
	// MaxLine is the longest line kept; the rest of a longer line is
	// dropped (the line still counts).
	MaxLine = 16 << 10
	// MaxTemplate is how much of a message's first line is masked into its
	// pattern.
	MaxTemplate = 1024
	// MaxWords is how many words of the first line a pattern keeps.
	MaxWords = 64
	// MaxSample is the longest sample message kept per pattern.
	MaxSample = 256
)

// Wildcard stands for a masked variable part in a pattern.
const Wildcard = "<*>"

// marker is the byte a masked span becomes while a line is masked; it
// cannot occur in text (Mask drops NULs).
const marker = 0

// Mask returns the words of a line with its variable parts replaced by
// Wildcard: quoted strings (not JSON keys, a double-quoted string after
// '{' or ',' and before ':', nor JSON string values, whose words are
// masked one by one), and every run of characters between
// delimiters that holds a digit (numbers, durations, ids, IPv4 and IPv6
// addresses, timestamps, UUIDs) or is a long hex string. Consecutive
// masked parts joined by one or two of ":./-_" (an address and its port,
// a date and time) become one. Whitespace is normalised to single spaces.
func Mask(line string) []string {
	var m masker
	key := m.key(line)
	if len(key) == 0 {
		return []string{}
	}
	return strings.Split(strings.ToValidUTF8(string(key), "\uFFFD"), " ")
}

// masker holds the buffers of masking, reused from line to line.
type masker struct{ tmp, out []byte }

// key returns the masked line as Mask's words joined by single spaces
// (before UTF-8 repair), in a buffer valid until the next call.
func (m *masker) key(line string) []byte {
	if len(line) > MaxTemplate {
		line = line[:MaxTemplate]
	}
	b := m.tmp[:0]
	for i := 0; i < len(line); {
		c := line[i]
		if c == marker {
			i++
			continue
		}
		if c == '"' && i >= 2 && line[i-1] == ':' && line[i-2] == '"' {
			// A JSON string value: its words are masked one by one, so a
			// JSON log's message text stays in its pattern.
			b = append(b, c)
			i++
			continue
		}
		if (c == '"' || c == '\'') && quoteOpens(line, i) {
			if j := strings.IndexByte(line[i+1:], c); j >= 0 {
				end := i + j + 2
				if c == '"' && end < len(line) && line[end] == ':' && i > 0 && (line[i-1] == '{' || line[i-1] == ',') {
					// A JSON key is text.
					b = append(b, line[i:end]...)
				} else {
					b = append(b, marker)
				}
				i = end
				continue
			}
		}
		if isDelim(c) || isSpace(c) {
			b = append(b, c)
			i++
			continue
		}
		j := i
		for j < len(line) && !isDelim(line[j]) && !isSpace(line[j]) && line[j] != marker {
			j++
		}
		seg := line[i:j]
		if isVariable(seg) {
			b = append(b, marker)
		} else {
			b = append(b, seg...)
		}
		i = j
	}
	b = collapse(b)
	m.tmp = b
	out := m.out[:0]
	words := 0
	for i := 0; i < len(b); {
		if isSpace(b[i]) {
			i++
			continue
		}
		if words == MaxWords {
			break
		}
		if words > 0 {
			out = append(out, ' ')
		}
		words++
		for ; i < len(b) && !isSpace(b[i]); i++ {
			if b[i] == marker {
				out = append(out, Wildcard...)
			} else {
				out = append(out, b[i])
			}
		}
	}
	m.out = out
	return out
}

// quoteOpens reports whether the quote at i starts a quoted string: it is
// at the start of a word or after a delimiter, not inside a word (an
// apostrophe in "don't").
func quoteOpens(s string, i int) bool {
	if i == 0 {
		return true
	}
	p := s[i-1]
	return isSpace(p) || (isDelim(p) && p != '"' && p != '\'')
}

// collapse turns marker, one or two of ":./-_", marker into one marker
// (an address and its port, a date and a time, IPv6's "::").
func collapse(b []byte) []byte {
	out := b[:0]
	for i := 0; i < len(b); i++ {
		c := b[i]
		n := len(out)
		if c == marker {
			switch {
			case n >= 1 && out[n-1] == marker:
				continue
			case n >= 2 && out[n-2] == marker && isJoiner(out[n-1]):
				out = out[:n-1]
				continue
			case n >= 3 && out[n-3] == marker && isJoiner(out[n-2]) && isJoiner(out[n-1]):
				out = out[:n-2]
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

func isJoiner(c byte) bool { return c == ':' || c == '.' || c == '/' || c == '-' || c == '_' }

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// isDelim reports the characters that separate the parts of a word:
// punctuation around values (key=value, (x), [x], a,b, path/parts, a:b).
func isDelim(c byte) bool {
	switch c {
	case '=', ':', ',', ';', '(', ')', '[', ']', '{', '}', '/', '<', '>', '|', '@', '"', '\'', '&', '?', '#', '*':
		return true
	}
	return false
}

// isVariable reports whether a word part is a value rather than text: it
// holds a digit, or it is a hex string of 16 or more characters.
func isVariable(s string) bool {
	hex := len(s) >= 16
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isDigit(c) {
			return true
		}
		if hex && !isHexOrDash(c) {
			hex = false
		}
	}
	return hex
}

func isHexOrDash(c byte) bool {
	return c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c >= '0' && c <= '9' || c == '-'
}

// Sample cuts a message's first line to MaxSample bytes, on a rune
// boundary, as valid UTF-8.
func Sample(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > MaxSample {
		cut := MaxSample
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
