package http

import (
	"bytes"

	"github.com/galago-project/galago/internal/l7"
)

// RequestPath returns the path of a request target (as on the request
// line, or HTTP/2's :path), what a span's url.path holds: origin-form's
// path, absolute-form's ("http://host/p?q" gives "/p"), "*" for
// asterisk-form; never the query or fragment. ok is false for CONNECT
// (its target names a host, not a path) and for a target of no form.
// partial says the target was seen only in part; the path is then partial
// too unless a '?' or '#' follows it in what was seen.
func RequestPath(method, target []byte, partial bool) (path []byte, pathPartial, ok bool) {
	if len(target) == 0 || string(method) == "CONNECT" {
		return nil, false, false
	}
	switch target[0] {
	case '*':
		return target[:1], false, true
	case '/':
	default:
		p, ok := absolutePath(target)
		if !ok {
			return nil, false, false
		}
		target = p
	}
	if i := bytes.IndexAny(target, "?#"); i >= 0 {
		return target[:i], false, true
	}
	return target, partial, true
}

// KeepPath returns a Path of pool holding the request's path (see
// RequestPath), or nil when pool is disabled or the request has none.
func KeepPath(pool *l7.PathPool, method, target []byte, partial bool) *l7.Path {
	if !pool.Enabled() {
		return nil
	}
	path, partial, ok := RequestPath(method, target, partial)
	if !ok {
		return nil
	}
	p := pool.Get()
	p.Set(path, partial)
	return p
}
