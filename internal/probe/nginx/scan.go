package nginx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/galago-project/galago/internal/elfsym"
)

// fileID identifies an ELF file across mount namespaces.
type fileID struct{ dev, ino uint64 }

// statID is the identity of the file at path.
func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, os.ErrInvalid
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

// nginxProc is a running nginx process: its executable and the nginx
// modules it mapped, as paths in its own mount namespace.
type nginxProc struct {
	pid     int
	exe     string
	modules []string
}

// isModule says whether a mapped file is an nginx dynamic module
// (ngx_stream_module.so and the like).
func isModule(path string) bool {
	b := filepath.Base(path)
	return strings.HasPrefix(b, "ngx_") && strings.HasSuffix(b, "_module.so")
}

// parseModules lists the nginx modules in a /proc/<pid>/maps.
func parseModules(r io.Reader) []string {
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		p := strings.Join(f[5:], " ")
		if isModule(p) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// findNginx lists the processes under root/proc named nginx, or, when
// exe is set, those running that file.
func findNginx(root string, exe *fileID) []nginxProc {
	ents, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		return nil
	}
	var out []nginxProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		dir := filepath.Join(root, "proc", e.Name())
		if exe != nil {
			if id, err := statID(filepath.Join(dir, "exe")); err != nil || id != *exe {
				continue
			}
		} else if comm, err := os.ReadFile(filepath.Join(dir, "comm")); err != nil || string(bytes.TrimSpace(comm)) != "nginx" {
			continue
		}
		path, err := os.Readlink(filepath.Join(dir, "exe"))
		if err != nil {
			continue
		}
		p := nginxProc{pid: pid, exe: strings.TrimSuffix(path, " (deleted)")}
		if f, err := os.Open(filepath.Join(dir, "maps")); err == nil {
			p.modules = parseModules(f)
			f.Close()
		}
		out = append(out, p)
	}
	return out
}

// inRoot is path of process pid's mount namespace, as this process can
// open it.
func inRoot(root string, pid int, path string) string {
	return filepath.Join(root, "proc", strconv.Itoa(pid), "root", path)
}

// checkExe says why the file at path is not an nginx executable this
// feature can attach to: not ELF, or without the defined functions
// ngx_event_connect_peer and ngx_close_connection in .symtab or .dynsym.
func checkExe(path string) error {
	offs, err := hookOffsets(path)
	if err != nil {
		return err
	}
	if offs[hooks[0].sym] == 0 || offs[hooks[1].sym] == 0 {
		return fmt.Errorf("no symbols %s and %s: not nginx, or stripped of its symbol tables", hooks[0].sym, hooks[1].sym)
	}
	return nil
}

// hookOffsets are the file offsets of the hooked functions the file at
// path defines, from .symtab, else .dynsym (only these names are looked
// up: a large executable's symbols are never loaded whole).
func hookOffsets(path string) (map[string]uint64, error) {
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = h.sym
	}
	offs, err := elfsym.Funcs(path, names, elfsym.Static, elfsym.Dynamic)
	if errors.Is(err, elfsym.ErrNoTable) {
		return map[string]uint64{}, nil
	}
	return offs, err
}
