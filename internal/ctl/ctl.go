// Package ctl is galago's gopher-ctl: the command-line client of the local
// control socket (see package api), which configures probes whether or not
// the REST API is on:
//
//	gopher-ctl probe get <name>
//	gopher-ctl probe set <name> '<json>'
//	gopher-ctl probe list
//
// It prints the daemon's reply as gala-gopher's gopher-ctl does (the body a
// REST call would get), but, unlike it, exits non-zero when the daemon
// refuses the request. gala-gopher's `gopher-ctl metric` (a destructive read
// of the metrics log) is not provided.
package ctl

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/galago-project/galago/internal/api"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the daemon refused the request, or could not be reached
	exitUsage   = 2
	dialTimeout = 5 * time.Second
	// replyTimeout covers a set that starts a probe (BPF load and attach)
	// while other control requests queue before it.
	replyTimeout = 2 * time.Minute
)

// SocketEnv names the environment variable that points gopher-ctl at a
// control socket other than the default (galago's cmd_socket setting).
const SocketEnv = "GALAGO_CTL_SOCKET"

const usage = `Usage:
   gopher-ctl [--socket PATH] probe get <probe_name>
   gopher-ctl [--socket PATH] probe set <probe_name> '<probe_config>'
   gopher-ctl [--socket PATH] probe list

The control socket is --socket, else $` + SocketEnv + `, else the default
below; it must match galago's cmd_socket setting (make run:
` + SocketEnv + `=/tmp/galago-run/gala_gopher_cmd.sock).
`

// Main runs gopher-ctl with args (the arguments after the program name, or
// after "ctl" for `galago ctl ...`) and returns the exit code. socketPath is
// the default control socket, overridden by --socket.
func Main(args []string, stdout, stderr io.Writer, socketPath string) int {
	fs := flag.NewFlagSet("gopher-ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	sock := fs.String("socket", socketPath, "control socket `path`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	req, err := parseCommand(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "gopher-ctl: %v\n", err)
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	rep, err := roundTrip(*sock, req)
	if err != nil {
		fmt.Fprintf(stderr, "gopher-ctl: %v\n", err)
		return exitFailed
	}
	_, _ = io.WriteString(stdout, rep.Body)
	if rep.Status >= 400 {
		return exitFailed
	}
	return exitOK
}

func parseCommand(args []string) (api.CtlRequest, error) {
	if len(args) == 0 {
		return api.CtlRequest{}, errors.New("please specify the request type")
	}
	switch args[0] {
	case "probe":
	case "metric":
		return api.CtlRequest{}, errors.New(`"metric" is not supported by galago: read metrics from its Prometheus endpoint or metric logs`)
	default:
		return api.CtlRequest{}, fmt.Errorf("unknown request type: %s", args[0])
	}
	args = args[1:]
	if len(args) == 0 {
		return api.CtlRequest{}, errors.New("please specify the probe operation")
	}
	op, args := args[0], args[1:]
	want := 1 // arguments after the operation
	switch op {
	case api.OpGet:
	case api.OpSet:
		want = 2
	case api.OpList:
		want = 0
	default:
		return api.CtlRequest{}, fmt.Errorf("unknown probe operation: %s", op)
	}
	switch {
	case len(args) < want && len(args) == 0:
		return api.CtlRequest{}, errors.New("please specify the probe name")
	case len(args) < want:
		return api.CtlRequest{}, errors.New("please specify the probe config")
	case len(args) > want && op == api.OpSet:
		return api.CtlRequest{}, errors.New("too many arguments: quote the probe config as one argument, e.g. '{\"state\":\"running\"}'")
	case len(args) > want:
		return api.CtlRequest{}, errors.New("too many arguments")
	}
	req := api.CtlRequest{Op: op}
	if want >= 1 {
		req.Name = args[0]
	}
	if want == 2 {
		req.Conf = args[1]
	}
	return req, nil
}

// roundTrip sends one request and reads its reply.
func roundTrip(path string, req api.CtlRequest) (api.CtlReply, error) {
	var rep api.CtlReply
	c, err := net.DialTimeout("unix", path, dialTimeout)
	if err != nil {
		return rep, dialError(path, err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(replyTimeout))
	b, err := json.Marshal(req)
	if err != nil {
		return rep, err
	}
	// A write error is reported only if no reply follows: the daemon may
	// refuse the peer and answer before reading the request.
	_, werr := c.Write(append(b, '\n'))
	line, err := bufio.NewReader(io.LimitReader(c, api.MaxCtlReply)).ReadBytes('\n')
	if err != nil {
		if werr != nil {
			return rep, fmt.Errorf("sending the request to %s: %w", path, werr)
		}
		if errors.Is(err, io.EOF) {
			return rep, fmt.Errorf("%s closed the connection without a reply", path)
		}
		return rep, fmt.Errorf("reading the reply from %s: %w", path, err)
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		return rep, fmt.Errorf("malformed reply from %s: %w", path, err)
	}
	return rep, nil
}

func dialError(path string, err error) error {
	hint := ""
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		hint = " (is galago running? if its cmd_socket is elsewhere, give --socket or " + SocketEnv + ")"
	case errors.Is(err, os.ErrPermission):
		hint = " (gopher-ctl must run as root)"
	}
	return fmt.Errorf("cannot connect to the galago control socket %s: %w%s", path, err, hint)
}
