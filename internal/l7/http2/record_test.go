package http2

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	xhttp2 "golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c" //nolint:staticcheck // the only Go server that implements Upgrade: h2c (net/http's Protocols does prior knowledge only)
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/galago-project/galago/internal/l7/l7test"
)

// TestRecordFixtures regenerates testdata/*.chunks from real software:
// Go's net/http h2c server (golang.org/x/net/http2/h2c) with the
// http2.Transport client (AllowHTTP, prior knowledge) and with curl's h2c
// upgrade, and a google.golang.org/grpc server and client (the health
// service, and an Echo service with a hand-written service descriptor and
// a raw bytes codec). Run with GALAGO_L7_RECORD=1 (curl: apt-get install
// curl).
func TestRecordFixtures(t *testing.T) {
	if os.Getenv("GALAGO_L7_RECORD") != "1" {
		t.Skip("set GALAGO_L7_RECORD=1 to record fixtures from real servers")
	}
	versions := fmt.Sprintf("Go %s, golang.org/x/net %s", runtime.Version(), moduleVersion("golang.org/x/net"))
	t.Run("h2c_go", func(t *testing.T) {
		srv := startH2C(t)
		r := l7test.Record(t, srv.addr)
		//nolint:staticcheck // x/net's http2.Transport with AllowHTTP, as the fixture says (net/http's Protocols is the newer way to the same frames)
		tr := &xhttp2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		c := &nethttp.Client{Transport: tr}
		base := "http://" + r.Addr()
		do := func(method, path string, body io.Reader) {
			req, err := nethttp.NewRequest(method, base+path, body)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		do("GET", "/users/123", nil)
		do("POST", "/orders", strings.NewReader(strings.Repeat("o", 20000)))
		do("GET", "/big", nil)
		do("GET", "/missing", nil)
		do("GET", "/fail", nil)
		do("HEAD", "/users/123", nil)
		// Two requests at once, answered in the other order: /slow is held
		// until /users/7's response is written.
		done := make(chan struct{})
		go func() { do("GET", "/slow", nil); close(done) }()
		<-srv.slowStarted
		do("GET", "/users/7?verbose=1", nil)
		srv.release <- struct{}{}
		<-done
		tr.CloseIdleConnections() //nolint:staticcheck // see the Transport above
		save(t, r, "h2c_go.chunks", versions+": h2c server (h2c.NewHandler) and http2.Transport{AllowHTTP} client, one connection:\n"+
			"GET /users/123, POST /orders (20000 bytes), GET /big (40000 bytes), GET /missing (404), GET /fail (500), HEAD /users/123, "+
			"then GET /slow held open while GET /users/7?verbose=1 is answered first")
	})
	t.Run("h2c_upgrade_curl", func(t *testing.T) {
		srv := startH2C(t)
		r := l7test.Record(t, srv.addr)
		base := "http://" + r.Addr()
		out, err := exec.Command("curl", "-sS", "--http2", "-o", "/dev/null", base+"/users/42", "-o", "/dev/null", base+"/missing").CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		save(t, r, "h2c_upgrade_curl.chunks", versions+"; "+curlVersion(t)+": h2c server (h2c.NewHandler) driven by curl --http2 (HTTP/1.1 Upgrade: h2c, then HTTP/2):\n"+
			"curl --http2 /users/42 /missing (the first answered on stream 1 after the 101, the second on stream 3, 404)")
	})
	t.Run("grpc", func(t *testing.T) {
		addr := startGRPC(t)
		r := l7test.Record(t, addr)
		conn, err := grpc.NewClient("passthrough:///"+r.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hc := healthpb.NewHealthClient(conn)
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "galago"}); err != nil {
			t.Fatal(err)
		}
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
			t.Fatalf("Check(nope): %v", err)
		}
		unary := func(in string, want codes.Code) {
			b, out := []byte(in), []byte(nil)
			err := conn.Invoke(ctx, "/galago.test.Echo/Unary", &b, &out, grpc.CallContentSubtype(rawCodec{}.Name()))
			if status.Code(err) != want {
				t.Fatalf("Unary(%q): %v, want %v", in, err, want)
			}
		}
		unary("hello", codes.OK)
		unary("bad", codes.InvalidArgument)
		unary("boom", codes.Internal)
		// Bidirectional stream: three messages each way.
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/galago.test.Echo/Stream", grpc.CallContentSubtype(rawCodec{}.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			b := []byte(fmt.Sprintf("m%d", i))
			if err := st.SendMsg(&b); err != nil {
				t.Fatal(err)
			}
			var out []byte
			if err := st.RecvMsg(&out); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		var out []byte
		if err := st.RecvMsg(&out); !errors.Is(err, io.EOF) {
			t.Fatalf("stream end: %v", err)
		}
		// Server streaming, cancelled by the client after the first status.
		wctx, wcancel := context.WithCancel(ctx)
		w, err := hc.Watch(wctx, &healthpb.HealthCheckRequest{Service: "galago"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatal(err)
		}
		wcancel()
		if _, err := w.Recv(); status.Code(err) != codes.Canceled {
			t.Fatalf("Watch after cancel: %v", err)
		}
		unary("last", codes.OK)
		conn.Close()
		save(t, r, "grpc.chunks", fmt.Sprintf("google.golang.org/grpc %s server and client (%s), one connection:\n"+
			"grpc.health.v1.Health/Check galago (OK), Check nope (NOT_FOUND), galago.test.Echo/Unary hello (OK), bad (INVALID_ARGUMENT), boom (INTERNAL), "+
			"Echo/Stream bidi (3 messages each way), Health/Watch cancelled by the client after one message, Echo/Unary last (OK)",
			grpc.Version, versions))
	})
}

func save(t *testing.T, r *l7test.Recorder, name, comment string) {
	t.Helper()
	segs := r.Segments()
	if len(segs) == 0 {
		t.Fatal("nothing recorded")
	}
	var b bytes.Buffer
	if err := l7test.Write(&b, comment+"\nRecorded by TestRecordFixtures (GALAGO_L7_RECORD=1).", segs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func moduleVersion(path string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path).Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

func curlVersion(t *testing.T) string {
	out, err := exec.Command("curl", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(string(out), " (", 2)[0]
}

type h2cServer struct {
	addr        string
	slowStarted chan struct{}
	release     chan struct{}
}

// startH2C serves HTTP/2 cleartext (prior knowledge and Upgrade: h2c).
func startH2C(t *testing.T) *h2cServer {
	t.Helper()
	s := &h2cServer{slowStarted: make(chan struct{}, 1), release: make(chan struct{}, 1)}
	mux := nethttp.NewServeMux()
	mux.HandleFunc("/users/", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		_, _ = io.WriteString(w, `{"id":123,"name":"galago"}`)
	})
	mux.HandleFunc("/orders", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.WriteHeader(nethttp.StatusCreated)
		fmt.Fprintf(w, "%d\n", n)
	})
	mux.HandleFunc("/big", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		_, _ = io.WriteString(w, strings.Repeat("b", 40000))
	})
	mux.HandleFunc("/fail", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.Error(w, "boom", nethttp.StatusInternalServerError)
	})
	mux.HandleFunc("/slow", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		s.slowStarted <- struct{}{}
		<-s.release
		_, _ = io.WriteString(w, "slow\n")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &nethttp.Server{Handler: h2c.NewHandler(mux, &xhttp2.Server{})} //nolint:staticcheck // see the import
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	s.addr = ln.Addr().String()
	return s
}

// rawCodec passes messages as bytes: the Echo service needs no protoc.
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("raw codec: %T is not *[]byte", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("raw codec: %T is not *[]byte", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// echoDesc is a service defined by hand (no generated code).
var echoDesc = grpc.ServiceDesc{
	ServiceName: "galago.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil {
				return nil, err
			}
			switch string(in) {
			case "bad":
				return nil, status.Error(codes.InvalidArgument, "bad input")
			case "boom":
				return nil, status.Error(codes.Internal, "boom")
			}
			out := append([]byte("echo:"), in...)
			return &out, nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, st grpc.ServerStream) error {
			for {
				var in []byte
				if err := st.RecvMsg(&in); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				out := append([]byte("echo:"), in...)
				if err := st.SendMsg(&out); err != nil {
					return err
				}
			}
		},
	}},
}

func startGRPC(t *testing.T) string {
	t.Helper()
	encoding.RegisterCodec(rawCodec{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("galago", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	s.RegisterService(&echoDesc, struct{}{})
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}
