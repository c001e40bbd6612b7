package output

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// MB is the unit of gala-gopher's size settings.
const MB = 1 << 20

// rotatingFile is an append-only log that, before a write would take it past
// max bytes, renames itself to <path>.1 (replacing the previous backup) and
// starts afresh. Disk use is therefore at most 2*max plus one write. Each
// Write lands whole in one file, so a line is never split by a rotation.
type rotatingFile struct {
	path string
	max  int64

	mu     sync.Mutex
	f      *os.File
	size   int64
	closed bool
}

func openRotating(path string, maxBytes int64) (*rotatingFile, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("%s: size limit must be positive, got %d", path, maxBytes)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	w := &rotatingFile{path: path, max: maxBytes}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *rotatingFile) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	w.f, w.size = f, st.Size()
	return nil
}

func (w *rotatingFile) rotate() error {
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		return err
	}
	return w.open()
}

// Write appends p, rotating first when p would not fit.
func (w *rotatingFile) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, os.ErrClosed
	}
	if w.f == nil {
		// A failed rotation left no file open: try again.
		if err := w.open(); err != nil {
			return 0, err
		}
	}
	if w.size > 0 && w.size+int64(len(p)) > w.max {
		if err := w.rotate(); err != nil {
			return 0, fmt.Errorf("rotate %s: %w", w.path, err)
		}
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	return n, err
}

func (w *rotatingFile) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// OpenRotating opens an append-only file that keeps one .1 backup and
// rotates before it would pass maxBytes (the daemon's debug log uses it).
func OpenRotating(path string, maxBytes int64) (io.WriteCloser, error) {
	return openRotating(path, maxBytes)
}
