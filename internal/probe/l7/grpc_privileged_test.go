package l7

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/galago-project/galago/internal/table"
)

// The gRPC service of the test, without generated code: a unary call and a
// server-streaming call, each answering with the status its request asks
// for ("<code>" or "<code> <n>" messages first for the stream).
const (
	grpcService = "galago.test.Echo"
	grpcUnary   = "/" + grpcService + "/Unary"
	grpcList    = "/" + grpcService + "/List"
	// grpcStreamed is how many messages each List call sends.
	grpcStreamed = 3
)

var grpcDesc = grpc.ServiceDesc{
	ServiceName: grpcService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		if err := grpcAsked(in.Value); err != nil {
			return nil, err
		}
		return wrapperspb.String("ok"), nil
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "List", ServerStreams: true, Handler: func(_ any, s grpc.ServerStream) error {
		in := new(wrapperspb.StringValue)
		if err := s.RecvMsg(in); err != nil {
			return err
		}
		for i := range grpcStreamed {
			if err := s.SendMsg(wrapperspb.String(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return grpcAsked(in.Value)
	}}},
}

// grpcAsked is the status a request asks for: nil for OK.
func grpcAsked(code string) error {
	for c := range codes.Code(17) {
		if c.String() == code {
			if c == codes.OK {
				return nil
			}
			return status.Error(c, "asked for")
		}
	}
	return status.Errorf(codes.InvalidArgument, "unknown code %q", code)
}

// grpcCodes are the statuses the client asks for, with their class in the
// rows: NOT_FOUND is the client's fault, INTERNAL the server's.
var grpcCodes = []codes.Code{codes.OK, codes.NotFound, codes.Internal}

func grpcServer() error {
	ln, err := listenLoopback()
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	s.RegisterService(&grpcDesc, nil)
	return s.Serve(ln)
}

// grpcClient makes GALAGO_L7_N calls of each method and status of
// grpcCodes to 127.0.0.1:GALAGO_L7_PORT, 4 at a time, and prints the count
// of each "method code" it got.
func grpcClient() error {
	n := envInt("GALAGO_L7_N")
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", envInt("GALAGO_L7_PORT")), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx := context.Background()
	call := func(method string, code codes.Code) (codes.Code, error) {
		in := wrapperspb.String(code.String())
		if method == grpcUnary {
			return status.Code(conn.Invoke(ctx, method, in, new(wrapperspb.StringValue))), nil
		}
		st, err := conn.NewStream(ctx, &grpcDesc.Streams[0], method)
		if err != nil {
			return 0, err
		}
		if err := st.SendMsg(in); err != nil {
			return 0, err
		}
		if err := st.CloseSend(); err != nil {
			return 0, err
		}
		for got := 0; ; got++ {
			err := st.RecvMsg(new(wrapperspb.StringValue))
			if err == nil {
				continue
			}
			if got != grpcStreamed {
				return 0, fmt.Errorf("%s: %d messages, want %d", method, got, grpcStreamed)
			}
			if errors.Is(err, io.EOF) {
				return codes.OK, nil
			}
			return status.Code(err), nil
		}
	}
	type job struct {
		method string
		code   codes.Code
	}
	jobs := make(chan job)
	type result struct {
		key string
		err error
	}
	results := make(chan result)
	for range 4 {
		go func() {
			for j := range jobs {
				got, err := call(j.method, j.code)
				if err == nil && got != j.code {
					err = fmt.Errorf("%s asked %v: got %v", j.method, j.code, got)
				}
				results <- result{j.method + " " + got.String(), err}
			}
		}()
	}
	go func() {
		for range n {
			for _, m := range []string{grpcUnary, grpcList} {
				for _, c := range grpcCodes {
					jobs <- job{m, c}
				}
			}
		}
		close(jobs)
	}()
	counts := map[string]int{}
	var firstErr error
	for range n * 2 * len(grpcCodes) {
		r := <-results
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
		counts[r.key]++
	}
	printCounts(counts)
	return firstErr
}

// testGRPC: a grpc-go server and client (this test binary,
// re-executed) with a unary and a server-streaming method, 40 calls of
// each answering OK, NOT_FOUND and INTERNAL: on both ends every call is
// one request and one response in http2 rows, per method too, NOT_FOUND
// counted as the client's error and INTERNAL as the server's, as the
// client saw them.
func testGRPC(t *testing.T, e *env) {
	const n = 40
	_, port := e.startHelper("grpcserver")
	got := e.runHelper("grpcclient", fmt.Sprintf("GALAGO_L7_N=%d", n), fmt.Sprintf("GALAGO_L7_PORT=%d", port))
	total := float64(2 * len(grpcCodes) * n)
	recs, tallies := e.check(map[string]expect{
		"server": {m: rowMatch{tbl: table.L7Rpc, role: "server", port: port, protocol: "http2", ssl: "no_ssl"}, n: total},
		"client": {m: rowMatch{tbl: table.L7Rpc, role: "client", port: port, protocol: "http2", ssl: "no_ssl"}, n: total},
	})
	for role, s := range tallies {
		if want := float64(2 * 2 * n); s.errs != want {
			t.Errorf("%s l7_rpc err_count %v, want %v", role, s.errs, want)
		}
	}
	for _, role := range []string{"server", "client"} {
		for _, method := range []string{grpcUnary, grpcList} {
			s := sumRows(recs, rowMatch{tbl: table.L7RpcApi, role: role, port: port, protocol: "http2", ssl: "no_ssl", api: method})
			ok, client, server := got[method+" "+codes.OK.String()], got[method+" "+codes.NotFound.String()], got[method+" "+codes.Internal.String()]
			if want := ok + client + server; s.req != want || s.resp != want || s.clientErr != client || s.serverEr != server {
				t.Logf("%s l7_rpc_api rows: %v", role, apis(recs, port, role))
				t.Errorf("%s l7_rpc_api %q: %v, want %v requests and responses, %v client and %v server errors",
					role, method, s, want, client, server)
			}
		}
	}
}
