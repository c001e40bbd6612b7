// gotls is a test program for the Go TLS uprobes: an HTTPS server and a
// client in one process, making the requests given on the command line
// over one keep-alive TLS connection (HTTP/1.1), then exiting. With
// "deep N" its client writes the N requests itself, each from a new
// goroutine at a call depth of up to 600 frames: at some depths
// crypto/tls.(*Conn).Write finds the stack too small in its prologue,
// grows it (morestack) and starts again from its entry.
package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
)

func main() {
	deep := len(os.Args) > 2 && os.Args[1] == "deep"
	n, _ := strconv.Atoi(os.Args[len(os.Args)-1])
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	srv.Listener, _ = net.Listen("tcp4", "127.0.0.1:0")
	srv.StartTLS()
	defer srv.Close()
	if deep {
		if err := deepWrites(srv.Listener.Addr().String(), n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1
		ForceAttemptHTTP2: false,
	}}
	for i := 0; i < n; i++ {
		resp, err := client.Get(fmt.Sprintf("%s/item/%d", srv.URL, i))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(b))
	}
}

// deepWrites sends n requests on one TLS connection to addr, request i
// written at call depth i%600 by a goroutine of its own (a new stack), and
// reads each response; it prints "deep <n>".
func deepWrites(addr string, n int) error {
	c, err := tls.Dial("tcp4", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return err
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < n; i++ {
		req := []byte(fmt.Sprintf("GET /deep/%d HTTP/1.1\r\nHost: gotls\r\n\r\n", i))
		done := make(chan error)
		go func() { done <- writeAt(c, req, i%600) }()
		if err := <-done; err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	fmt.Println("deep", n)
	return nil
}

// writeAt writes b on c from depth frames down.
//
//go:noinline
func writeAt(c *tls.Conn, b []byte, depth int) error {
	if depth > 0 {
		return writeAt(c, b, depth-1)
	}
	_, err := c.Write(b)
	return err
}
