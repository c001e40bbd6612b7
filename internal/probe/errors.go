package probe

import "errors"

// ErrBadRequest is gala-gopher's generic "Bad request" answer (a section
// present without anything it understands).
var ErrBadRequest = errors.New("Bad request") //nolint:staticcheck // gala-gopher's exact reply text

// ErrUnknownFeature is returned for a feature name that is neither built in
// nor declared as a custom probe (REST answers 404 "url not found").
var ErrUnknownFeature = errors.New("url not found")

// ErrNotImplemented is returned for a gala-gopher feature whose probe galago
// does not have yet; galago never pretends to run it.
var ErrNotImplemented = errors.New("not supported in the current version")
