// gotls is a test program for the Go TLS uprobes: an HTTPS server and a
// client in one process, making the requests given on the command line
// over one keep-alive TLS connection (HTTP/1.1), then exiting.
package main

import (
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
	n, _ := strconv.Atoi(os.Args[1])
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	srv.Listener, _ = net.Listen("tcp4", "127.0.0.1:0")
	srv.StartTLS()
	defer srv.Close()
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
