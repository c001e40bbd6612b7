// Package ident appends resource names (Kafka topics, MongoDB collections)
// to API templates with the per-entity parts collapsed: names such as
// "logs_20241123", "tenant_5f2b9c0e4a1d3e7f90ab" or
// "cache-0b9e3f6a-2c1d-4e5f-8a7b-9c0d1e2f3a4b" would otherwise make one
// template per day, tenant or object.
package ident

// AppendCollapsed appends name to dst, replacing every UUID
// (8-4-4-4-12 hex digits) and every run of 16 or more hex digits that
// holds a decimal digit by "{id}", and every other run of 5 or more
// decimal digits by "{n}". Runs are bounded by characters that are not
// hex digits (for digit runs: not decimal digits), so "v2" or "2024" stay.
func AppendCollapsed[T string | []byte](dst []byte, name T) []byte {
	for i := 0; i < len(name); {
		if n := uuidAt(name[i:]); n > 0 && boundary(name, i, i+n) {
			dst = append(dst, "{id}"...)
			i += n
			continue
		}
		if n, digit := hexRun(name[i:]); n >= 16 && digit && boundary(name, i, i+n) {
			dst = append(dst, "{id}"...)
			i += n
			continue
		}
		if n := digitRun(name[i:]); n >= 5 && (i == 0 || !isDigit(name[i-1])) {
			dst = append(dst, "{n}"...)
			i += n
			continue
		}
		dst = append(dst, name[i])
		i++
	}
	return dst
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// boundary says name[i:j] is not in the middle of a longer hex run.
func boundary[T string | []byte](name T, i, j int) bool {
	return (i == 0 || !isHex(name[i-1])) && (j == len(name) || !isHex(name[j]))
}

func hexRun[T string | []byte](b T) (n int, digit bool) {
	for n < len(b) && isHex(b[n]) {
		digit = digit || isDigit(b[n])
		n++
	}
	return n, digit
}

func digitRun[T string | []byte](b T) int {
	n := 0
	for n < len(b) && isDigit(b[n]) {
		n++
	}
	return n
}

// uuidAt returns 36 when b starts with a UUID, else 0.
func uuidAt[T string | []byte](b T) int {
	if len(b) < 36 {
		return 0
	}
	for i := range 36 {
		switch i {
		case 8, 13, 18, 23:
			if b[i] != '-' {
				return 0
			}
		default:
			if !isHex(b[i]) {
				return 0
			}
		}
	}
	return 36
}
