// Command galago-image builds galago's container image without a
// container daemon (go-containerregistry) and writes it as an image
// tarball that `ctr images import`, `docker load` and `podman load` take:
//
//	galago-image -bin bin/galago-static -conf deploy/package/gala-gopher.conf \
//	    -tag galago:dev -o dist/galago-image.tar
//
// The image is one layer on an empty base: /usr/bin/galago (a static
// binary), the gopher-ctl link, gala-gopher's shipped configuration and an
// empty probes.init. Its environment points galago at the host's file
// system mounted on /host (GOPHER_HOST_PATH), as the DaemonSet mounts it.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	bin := flag.String("bin", "", "static galago binary")
	conf := flag.String("conf", "", "gala-gopher.conf to install in /etc/gala-gopher")
	tag := flag.String("tag", "galago:dev", "image reference")
	out := flag.String("o", "", "output tarball")
	version := flag.String("version", "dev", "org.opencontainers.image.version label")
	flag.Parse()
	if *bin == "" || *conf == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := build(*bin, *conf, *tag, *out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "galago-image:", err)
		os.Exit(1)
	}
}

func build(binPath, confPath, tag, out, version string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	binary, err := os.ReadFile(binPath)
	if err != nil {
		return err
	}
	conf, err := os.ReadFile(confPath)
	if err != nil {
		return err
	}
	probesInit := []byte("# Probes galago starts with; GOPHER_PROBES_INIT replaces this file's content.\n")
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	mtime := time.Unix(0, 0)
	entries := []struct {
		name, link string
		mode       int64
		body       []byte
		dir        bool
	}{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/gala-gopher/", dir: true, mode: 0o755},
		{name: "etc/gala-gopher/gala-gopher.conf", mode: 0o640, body: conf},
		{name: "etc/gala-gopher/probes.init", mode: 0o640, body: probesInit},
		{name: "tmp/", dir: true, mode: 0o1777},
		{name: "usr/", dir: true, mode: 0o755},
		{name: "usr/bin/", dir: true, mode: 0o755},
		{name: "usr/bin/galago", mode: 0o755, body: binary},
		{name: "usr/bin/gopher-ctl", link: "galago", mode: 0o777},
		{name: "var/", dir: true, mode: 0o755},
		{name: "var/log/", dir: true, mode: 0o755},
		{name: "var/log/gala-gopher/", dir: true, mode: 0o755},
		{name: "var/run/", dir: true, mode: 0o755},
		{name: "var/run/gala_gopher/", dir: true, mode: 0o755},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Uname: "root", Gname: "root"}
		switch {
		case e.dir:
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: v1.Time{Time: mtime},
		Config: v1.Config{
			Entrypoint: []string{"/usr/bin/galago"},
			Cmd:        []string{"-c", "/etc/gala-gopher/gala-gopher.conf"},
			Env:        []string{"GOPHER_HOST_PATH=/host", "PATH=/usr/bin"},
			Labels: map[string]string{
				"org.opencontainers.image.title":   "galago",
				"org.opencontainers.image.version": version,
				"org.opencontainers.image.source":  "https://github.com/galago-project/galago",
			},
		},
	})
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}
