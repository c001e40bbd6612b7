// Package api is galago's control plane: gala-gopher's REST dynamic
// configuration API (GET and PUT /<feature> on rest_api_server, plain HTTP or
// TLS/mTLS) and the local control socket that gopher-ctl talks to, which
// works whether or not the REST server is on.
//
// Both transports are thin: they decode a request, hand the feature name and
// the JSON configuration to a Controller (the probe Manager), and answer with
// gala-gopher's reply bodies. What a configuration means — merging, rollback,
// parameter checks and their error messages — is the Controller's business.
//
// Limits: one body is at most 1 MiB (gala-gopher's limit); replies are not
// truncated to 127 bytes as gala-gopher's are; methods other than GET and PUT
// get 405 with an Allow header where gala-gopher's libevent answers 501.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/galago-project/galago/internal/probe"
)

// Controller is the probe Manager as the control plane sees it.
type Controller interface {
	// Put applies a raw JSON request body to a feature. Errors: an error wrapping
	// probe.ErrUnknownFeature means 404 {"result": "failed", "message":"url not found"};
	// any other error is a 400 whose message is err.Error().
	Put(feature string, body []byte) error
	// Get returns the compact JSON (with trailing \n) for GET /<feature>, or an error wrapping probe.ErrUnknownFeature.
	Get(feature string) ([]byte, error)
}

// Namer is optionally implemented by a Controller that can list its features
// (built-in and custom); the control socket's "list" uses it, and falls back
// to the built-in catalogue without it.
type Namer interface {
	Names() []string
}

// DefaultMaxBody is gala-gopher's limit on a PUT body, and on the
// configuration sent over the control socket.
const DefaultMaxBody = 1 << 20

// successMessage is gala-gopher's answer to an accepted configuration.
const successMessage = "New config takes effect"

// notFoundMessage is gala-gopher's 404 message (lower case, as the current
// libevent server writes it; the older libmicrohttpd one said "Url not found").
const notFoundMessage = "url not found"

// reply renders gala-gopher's reply body, with its exact spacing:
//
//	{ "result": "success", "message":"New config takes effect" }\n
//
// Unlike gala-gopher, the message is escaped as a JSON string (its snprintf
// does not escape quotes) and the reply is not cut at 127 bytes.
func reply(ok bool, message string) []byte {
	result := "failed"
	if ok {
		result = "success"
	}
	var b bytes.Buffer
	b.WriteString(`{ "result": "`)
	b.WriteString(result)
	b.WriteString(`", "message":`)
	b.Write(jsonString(message))
	b.WriteString(" }\n")
	return b.Bytes()
}

// jsonString encodes s as a JSON string literal without HTML escaping, so
// messages such as "invalid value 0, must be in [5, 600]" or a name with '<'
// read as gala-gopher writes them.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		// Encoding a Go string cannot fail (invalid UTF-8 becomes U+FFFD).
		panic(fmt.Sprintf("api: encoding a string: %v", err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// put applies conf (already decoded JSON) and returns the status and the
// reply body.
func put(ctl Controller, feature string, conf []byte) (int, []byte) {
	if feature == "" {
		return http.StatusNotFound, reply(false, notFoundMessage)
	}
	if err := ctl.Put(feature, conf); err != nil {
		if errors.Is(err, probe.ErrUnknownFeature) {
			return http.StatusNotFound, reply(false, notFoundMessage)
		}
		return http.StatusBadRequest, reply(false, err.Error())
	}
	return http.StatusOK, reply(true, successMessage)
}

// get returns the status and body of GET /<feature>.
func get(ctl Controller, feature string) (int, []byte) {
	if feature == "" {
		return http.StatusNotFound, reply(false, notFoundMessage)
	}
	b, err := ctl.Get(feature)
	if err != nil {
		if errors.Is(err, probe.ErrUnknownFeature) {
			return http.StatusNotFound, reply(false, notFoundMessage)
		}
		return http.StatusInternalServerError, reply(false, err.Error())
	}
	return http.StatusOK, b
}
