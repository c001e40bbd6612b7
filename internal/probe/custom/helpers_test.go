package custom

import (
	"os"
	"testing"

	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/table"
)

// testTables are the tables of testdata/myprobe.meta.
func testTables(t testing.TB) []*table.Table {
	t.Helper()
	data, err := os.ReadFile("testdata/myprobe.meta")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := table.ParseMeta("myprobe.meta", data)
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

func tableByName(tables []*table.Table, name string) *table.Table {
	for _, t := range tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// testFeature is a custom probe declaration like LoadDecls makes.
func testFeature(bin string) *probe.Feature {
	return &probe.Feature{
		Name: "myprobe", IPCType: 101, Snooper: probe.SnooperProc,
		SubItems: []probe.SubItem{{Name: "sub1", Bit: 1}, {Name: "sub2", Bit: 2}},
		Custom: &probe.CustomDecl{Bin: bin, MetaPath: MetaPath(bin), Params: []string{"p1"},
			SubItemList: []string{"sub1", "sub2"}},
	}
}
