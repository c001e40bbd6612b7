package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseStat: never panics; a parsed comm is what stands between the
// first '(' and the last ')'.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("19107 (cat) R 19105 19105 9398 0 -1 4194304 101 0 0 0 0 0 0 0 20 0 1 0 42969 3133440 387\n"))
	f.Add([]byte("9 (a) b) (c) S 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 0 0\n"))
	f.Add([]byte("1 () Z 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStat(b)
		if err != nil {
			return
		}
		open, closing := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if st.Comm != string(b[open+1:closing]) {
			t.Fatalf("comm %q from %q", st.Comm, b)
		}
	})
}

// FuzzContainerFromCgroup: never panics; what it finds has the form of a
// container id and a pod uid.
func FuzzContainerFromCgroup(f *testing.F) {
	for _, name := range []string{"200", "300", "400", "500", "700", "800"} {
		b, err := os.ReadFile(filepath.Join(fixtureRoot, "proc", name, "cgroup"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("0::/kubepods.slice/kubepods-pod0f9c2a3e_1111_2222_3333_444455556666.slice/crio-" + criID + ".scope\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cid, pod := ContainerFromCgroup(ParseCgroup(b))
		if cid != "" && (len(cid) != 64 || !isHex(cid) || strings.ToLower(cid) != cid) {
			t.Fatalf("container id %q", cid)
		}
		if pod != "" && !IsPodID(pod) {
			t.Fatalf("pod id %q", pod)
		}
	})
}

// FuzzRuntimeFiles: the runtime state parsers never panic on any input.
func FuzzRuntimeFiles(f *testing.F) {
	for _, p := range []string{
		"run/containerd/runc/k8s.io/" + criID + "/state.json",
		"run/runc/" + runcID + "/state.json",
		"var/lib/docker/containers/" + dockerID + "/config.v2.json",
		"srv/bundles/sleeper/config.json",
	} {
		b, err := os.ReadFile(filepath.Join(fixtureRoot, p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Container
		if st, err := parseRuncState(b); err == nil {
			applyAnnotations(&c, st.Annotations)
			_ = PodIDFromPath(st.CgroupsPath)
		}
		if ann, err := parseSpecAnnotations(b); err == nil {
			applyAnnotations(&c, ann)
		}
		if dc, err := parseDockerConfig(b); err == nil {
			applyAnnotations(&c, dc.Config.Labels)
		}
	})
}

// FuzzParseDockerList: never panics; every container it returns has a
// full id.
func FuzzParseDockerList(f *testing.F) {
	const id = "3f5c2a1b9d8e7f60a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718"
	f.Add([]byte(`[{"Id":"` + id + `","Names":["/web"],"Image":"nginx:1.25","Labels":{"a":"b"},"State":"running"}]`))
	f.Add([]byte(`[{"Id":"` + id + `","Names":["/k8s_envoy_web-0_shop_u_0"],"Labels":{"io.kubernetes.container.name":"envoy"}}]`))
	f.Add([]byte(`[{"Id":"web"}]`))
	f.Add([]byte(`{"message":"page not found"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := parseDockerList(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		for _, c := range cs {
			if len(c.ID) != 64 || !isHex(c.ID) {
				t.Fatalf("container %+v from %q", c, b)
			}
		}
	})
}
