// Command gen writes galago's Grafana dashboards into a directory, one
// <uid>.json each: go generate ./internal/dashboards.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/galago-project/galago/internal/dashboards"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen DIR")
		os.Exit(2)
	}
	for _, d := range dashboards.All() {
		b, err := d.Render()
		if err == nil {
			err = os.WriteFile(filepath.Join(os.Args[1], d.UID+".json"), b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
