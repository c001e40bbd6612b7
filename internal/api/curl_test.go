package api

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/fuzz/FuzzParseBody from the seed examples")

// seedExample is one curl call from testdata/seeds.curl.
type seedExample struct {
	source     string
	args       []string // after "curl"
	wantStatus int
	wantMsg    string // error message for a 4xx
	wantPut    string // JSON the controller must get; "" = the quoted text
	hasPut     bool
}

func loadSeedExamples(t *testing.T) []seedExample {
	t.Helper()
	b, err := os.ReadFile("testdata/seeds.curl")
	if err != nil {
		t.Fatal(err)
	}
	var out []seedExample
	for _, block := range strings.Split(string(b), "# source: ")[1:] {
		var ex seedExample
		var cmd []string
		for i, line := range strings.Split(block, "\n") {
			switch {
			case i == 0:
				ex.source = line
			case strings.HasPrefix(line, "# expect: "):
				status, msg, _ := strings.Cut(strings.TrimPrefix(line, "# expect: "), " ")
				ex.wantStatus, err = strconv.Atoi(status)
				if err != nil {
					t.Fatalf("%s: %v", ex.source, err)
				}
				ex.wantMsg = msg
			case strings.HasPrefix(line, "# put: "):
				ex.wantPut = strings.ReplaceAll(strings.TrimPrefix(line, "# put: "), `\n`, "\n")
				ex.hasPut = true
			default:
				cmd = append(cmd, line)
			}
		}
		words, err := shellWords(strings.TrimSpace(strings.Join(cmd, "\n")))
		if err != nil || len(words) < 2 || words[0] != "curl" {
			t.Fatalf("%s: cannot read the command: %q, %v", ex.source, words, err)
		}
		ex.args = words[1:]
		out = append(out, ex)
	}
	if len(out) != 9 {
		t.Fatalf("read %d examples from testdata/seeds.curl; want 9", len(out))
	}
	return out
}

// shellWords splits a command as sh would for words made of plain text and
// single-quoted parts, which is all the documented examples use.
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			w.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case strings.ContainsRune("\"\\$`", r):
			return nil, fmt.Errorf("unsupported shell syntax %q", r)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// rawRequest is a request body as it arrived on the wire.
type rawRequest struct {
	method, path, ctype string
	body                []byte
}

// recorder keeps the raw requests before handing them to h.
type recorder struct {
	h    http.Handler
	mu   sync.Mutex
	reqs []rawRequest
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, rawRequest{r.Method, r.URL.Path, r.Header.Get("Content-Type"), b})
	rec.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(b))
	rec.h.ServeHTTP(w, r)
}

func (rec *recorder) last(t *testing.T) rawRequest {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		t.Fatal("no request reached the server")
	}
	return rec.reqs[len(rec.reqs)-1]
}

var hostPort = regexp.MustCompile(`^https?://[^/]+`)

// runCurl runs the real curl with args against base and returns the status
// and the reply body.
func runCurl(t *testing.T, base string, args []string) (int, string) {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("these tests run the real curl, which is not installed: %v", err)
	}
	full := []string{"-sS", "--noproxy", "*", "-w", "\n%{http_code}"}
	for _, a := range args {
		full = append(full, hostPort.ReplaceAllString(a, base))
	}
	out, err := exec.Command(curl, full...).Output()
	if err != nil {
		t.Fatalf("curl %q: %v", full, err)
	}
	i := bytes.LastIndexByte(out, '\n')
	status, err := strconv.Atoi(string(out[i+1:]))
	if err != nil {
		t.Fatalf("curl output %q: %v", out, err)
	}
	return status, string(out[:i])
}

// swapDataFlag turns -d into --data-urlencode and back, so each example is
// also sent in the other encoding.
func swapDataFlag(args []string) ([]string, bool) {
	out := append([]string(nil), args...)
	for i, a := range out {
		switch a {
		case "-d":
			out[i] = "--data-urlencode"
			return out, true
		case "--data-urlencode":
			out[i] = "-d"
			return out, true
		}
	}
	return out, false
}

// TestSeedCurlExamples sends every documented curl call, with the real curl
// and in both body encodings, and checks the reply and what the controller
// got. It also keeps the fuzz seed corpus equal to the bodies curl sends.
func TestSeedCurlExamples(t *testing.T) {
	fake := newFake()
	rec := &recorder{h: NewServer(ServerConfig{}, fake, nil).Handler()}
	ts := httptest.NewServer(rec)
	defer ts.Close()

	corpus := map[string]rawRequest{}
	for i, ex := range loadSeedExamples(t) {
		variants := [][]string{ex.args}
		if swapped, ok := swapDataFlag(ex.args); ok {
			variants = append(variants, swapped)
		}
		for j, args := range variants {
			name := ex.source
			if j > 0 {
				name += " with the other data flag"
			}
			before := len(fake.puts())
			status, body := runCurl(t, ts.URL, args)
			raw := rec.last(t)
			feature := strings.TrimPrefix(raw.path, "/")

			switch {
			case raw.method == "GET":
				if status != 200 || body != string(fake.get[feature]) {
					t.Errorf("%s: %d %q; want the controller's GET bytes", name, status, body)
				}
				continue
			case ex.wantStatus == 200:
				if status != 200 || body != successReply {
					t.Errorf("%s: %d %q; want 200 %q", name, status, body, successReply)
				}
			default:
				if want := failedReply(ex.wantMsg); status != ex.wantStatus || body != want {
					t.Errorf("%s: %d %q; want %d %q", name, status, body, ex.wantStatus, want)
				}
			}
			puts := fake.puts()[before:]
			if ex.wantStatus != 200 {
				if len(puts) != 0 {
					t.Errorf("%s: a rejected body reached the controller: %+v", name, puts)
				}
			} else {
				want := ex.wantPut
				if !ex.hasPut {
					_, want, _ = strings.Cut(args[len(args)-1], "=")
				}
				if len(puts) != 1 || puts[0].Feature != feature || puts[0].Body != want {
					t.Errorf("%s: controller got %+v; want %s %q", name, puts, feature, want)
				}
			}
			flavour := "d"
			if args[len(args)-2] == "--data-urlencode" {
				flavour = "urlencode"
			}
			corpus[fmt.Sprintf("seed-%02d-%d-%s", i, j, flavour)] = raw
		}
	}
	for i, conf := range gopherCtlSeedConfs {
		corpus[fmt.Sprintf("seed-gopher-ctl-%d", i)] = rawRequest{ctype: "application/json", body: []byte(conf)}
	}
	checkCorpus(t, corpus)
}

// checkCorpus compares (or with -update writes) the FuzzParseBody seed files.
func checkCorpus(t *testing.T, corpus map[string]rawRequest) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzParseBody")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, r := range corpus {
		want := fmt.Sprintf("go test fuzz v1\nstring(%s)\n[]byte(%s)\n", strconv.Quote(r.ctype), strconv.Quote(string(r.body)))
		path := filepath.Join(dir, name)
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is missing or stale (go test ./internal/api -run TestSeedCurlExamples -update): %v", path, err)
		}
	}
}
