package api

// The control socket protocol. A client connects to the Unix stream socket
// and writes requests, one JSON object per line; the server answers each
// with one JSON object per line, in order, then the client closes (the
// server also closes after an idle timeout or a malformed request):
//
//	-> {"op":"set","name":"tcp","conf":"{\"state\":\"running\"}"}
//	<- {"status":200,"body":"{ \"result\": \"success\", \"message\":\"New config takes effect\" }\n"}
//
// status is the HTTP status the REST API would give and body its exact
// reply, so gopher-ctl prints what curl would. conf is a JSON string (not an
// embedded object) so that a malformed configuration reaches the server and
// gets gala-gopher's "invalid json format" answer.
//
// gala-gopher's gopher-ctl sends a fixed 1 MiB C struct instead; the two are
// not wire compatible, but galago ships its own gopher-ctl.

// DefaultCtlSocket is gala-gopher's control socket path.
const DefaultCtlSocket = "/var/run/gala_gopher/gala_gopher_cmd.sock"

// Operations of a CtlRequest.
const (
	OpGet  = "get"  // GET /<name>
	OpSet  = "set"  // PUT /<name> with conf
	OpList = "list" // every feature and its configured state, one "name\tstate" line each
)

// CtlRequest is one request line on the control socket.
type CtlRequest struct {
	Op   string `json:"op"`
	Name string `json:"name,omitempty"`
	// Conf is the configuration JSON for OpSet, without gala-gopher's
	// "json=" prefix, as `gopher-ctl probe set <name> '<json>'` takes it.
	Conf string `json:"conf,omitempty"`
}

// CtlReply is one reply line on the control socket.
type CtlReply struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// MaxCtlReply bounds a reply line a client accepts.
const MaxCtlReply = 16 << 20

// maxCtlRequest bounds a request line: a 1 MiB configuration may grow up to
// six times when escaped as a JSON string (\u00XX for control bytes).
func maxCtlRequest(maxConf int64) int { return int(6*maxConf + 64<<10) }
