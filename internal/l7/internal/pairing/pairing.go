// Package pairing pairs the requests and responses of protocols that tag
// both with a request id (CRPC, Dubbo2): a bounded queue of the requests
// waiting for their response, matched in any order.
package pairing

import "github.com/galago-project/galago/internal/l7"

// Req is a request waiting for its response.
type Req[ID comparable] struct {
	ID   ID
	TS   uint64 // the request's first chunk
	Size int
	API  string
}

// Alone is r as an exchange without response.
func (r *Req[ID]) Alone() l7.Exchange {
	return l7.Exchange{HasRequest: true, Start: r.TS, API: r.API, ReqBytes: r.Size}
}

// Queue holds at most Max requests (the oldest beyond come out alone).
// The zero value with Max set is ready.
type Queue[ID comparable] struct {
	Max int
	q   []Req[ID]
}

// Len is how many requests wait.
func (q *Queue[ID]) Len() int { return len(q.q) }

// Push queues r, appending the oldest request to out when the queue is
// full.
func (q *Queue[ID]) Push(r Req[ID], out []l7.Exchange) []l7.Exchange {
	if len(q.q) >= q.Max && len(q.q) > 0 {
		out = append(out, q.q[0].Alone())
		copy(q.q, q.q[1:])
		q.q = q.q[:len(q.q)-1]
	}
	q.q = append(q.q, r)
	return out
}

// Take removes and returns the request of id.
func (q *Queue[ID]) Take(id ID) (Req[ID], bool) {
	for i := range q.q {
		if q.q[i].ID == id {
			r := q.q[i]
			copy(q.q[i:], q.q[i+1:])
			q.q = q.q[:len(q.q)-1]
			return r, true
		}
	}
	var none Req[ID]
	return none, false
}

// Answered is the exchange of request r and its response of size bytes
// at ts.
func (r *Req[ID]) Answered(ts uint64, size int, class l7.Class) l7.Exchange {
	return l7.Exchange{HasRequest: true, HasResponse: true, Start: r.TS, End: ts, Class: class, API: r.API, ReqBytes: r.Size, RespBytes: size}
}

// Flush appends every waiting request alone and empties the queue.
func (q *Queue[ID]) Flush(out []l7.Exchange) []l7.Exchange {
	for i := range q.q {
		out = append(out, q.q[i].Alone())
	}
	q.q = q.q[:0]
	return out
}
