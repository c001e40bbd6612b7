package l7

// MaxPath bounds a Path, in bytes.
const MaxPath = 256

// pathCutMark ends a Path that was cut short.
const pathCutMark = "..."

// Path is a request's raw path, the url.path a span carries: the request
// target's path with its query and fragment left out (a query may hold
// secrets; url.query is never kept). It is a fixed-size buffer so that a
// parser keeps paths without allocating once its PathPool has warmed up.
//
// Bytes outside visible ASCII are percent-encoded, so the value is valid
// UTF-8 whatever the capture held. A path longer than MaxPath, or seen only
// in part (its request line cut by the capture), is cut: it holds at most
// MaxPath-3 bytes of it followed by "...", and Cut reports it.
type Path struct {
	n   uint16
	cut bool
	b   [MaxPath]byte
}

// Set replaces the path with path, encoded and bounded as the type says;
// partial says path is only a prefix of the real one.
func (p *Path) Set(path []byte, partial bool) {
	const hex = "0123456789ABCDEF"
	n := 0
	for _, c := range path {
		if c > ' ' && c < 0x7f {
			if n == len(p.b) {
				partial = true
				break
			}
			p.b[n] = c
			n++
			continue
		}
		if n+3 > len(p.b) {
			partial = true
			break
		}
		p.b[n], p.b[n+1], p.b[n+2] = '%', hex[c>>4], hex[c&0xf]
		n += 3
	}
	p.cut = partial
	if partial {
		// Cut back to leave room for the mark, never inside a
		// percent-encoded byte.
		n = min(n, len(p.b)-len(pathCutMark))
		for k := 1; k <= 2 && n-k >= 0; k++ {
			if p.b[n-k] == '%' {
				n -= k
				break
			}
		}
		n += copy(p.b[n:], pathCutMark)
	}
	p.n = uint16(n)
}

// Bytes returns the path; it aliases p.
func (p *Path) Bytes() []byte { return p.b[:p.n] }

// String returns the path as a string (allocated).
func (p *Path) String() string { return string(p.b[:p.n]) }

// Cut reports whether the path was cut short (it ends in "...").
func (p *Path) Cut() bool { return p.cut }

// pathPoolFree bounds the Paths a PathPool keeps for reuse; more are left
// to the garbage collector, so an idle connection holds little.
const pathPoolFree = 8

// PathPool lends Paths to one parser's requests. A parser takes a Path
// when it reads a request whose path it keeps, hands it out with the
// request's Exchange (Emit), and calls Recycle when Feed or Flush begins:
// a Path handed out is valid until then, and reused after. The zero value
// is disabled: Get returns nil, so a parser that was not asked to keep
// paths does nothing more than a nil check per request.
type PathPool struct {
	on        bool
	free, out []*Path
}

// Enable makes Get lend Paths.
func (pp *PathPool) Enable() { pp.on = true }

// Enabled reports whether the pool lends Paths.
func (pp *PathPool) Enabled() bool { return pp.on }

// Get returns a Path to fill, nil when the pool is disabled.
func (pp *PathPool) Get() *Path {
	if !pp.on {
		return nil
	}
	if n := len(pp.free); n > 0 {
		p := pp.free[n-1]
		pp.free = pp.free[:n-1]
		return p
	}
	return new(Path)
}

// Emit returns p, to be set in an Exchange, and takes it back for reuse
// after the next Recycle. p may be nil.
func (pp *PathPool) Emit(p *Path) *Path {
	if p != nil {
		pp.out = append(pp.out, p)
	}
	return p
}

// Recycle takes back the Paths emitted since the last call: the
// Exchanges that carried them have been consumed.
func (pp *PathPool) Recycle() {
	if len(pp.out) == 0 {
		return
	}
	for i, p := range pp.out {
		if len(pp.free) < pathPoolFree {
			pp.free = append(pp.free, p)
		}
		pp.out[i] = nil
	}
	pp.out = pp.out[:0]
}
