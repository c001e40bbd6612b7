package event

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

// verbRe matches one fmt verb (flags, explicit index, width, precision).
var verbRe = regexp.MustCompile(`%[-+# 0]*(\[\d+\])?(\d+|\*)?(\.(\d+|\*)?)?[a-zA-Z%]`)

// verbs are the argument-taking verbs of format, in order.
func verbs(format string) []string {
	var out []string
	for _, v := range verbRe.FindAllString(format, -1) {
		if v != "%%" {
			out = append(out, v[len(v)-1:])
		}
	}
	return out
}

// sampleArgs are arguments of the types verbs expects.
func sampleArgs(vs []string) []any {
	args := make([]any, len(vs))
	for i, v := range vs {
		switch v {
		case "d":
			args[i] = 7
		case "s":
			args[i] = "sda"
		default:
			args[i] = 1.5
		}
	}
	return args
}

func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}

// TestCatalogue walks every event description: both languages present, the
// Chinese one in Chinese, both taking the same arguments, each (entity,
// metric) once.
func TestCatalogue(t *testing.T) {
	if len(Catalogue()) == 0 {
		t.Fatal("empty catalogue")
	}
	seen := map[[2]string]bool{}
	for _, d := range Catalogue() {
		name := d.Entity + "/" + d.Metric
		if d.Entity == "" || d.Metric == "" {
			t.Errorf("%q: entity and metric must be set", name)
		}
		key := [2]string{d.Entity, d.Metric}
		if seen[key] {
			t.Errorf("%s: defined twice", name)
		}
		seen[key] = true
		for _, lang := range Languages {
			if strings.TrimSpace(d.Text(lang)) == "" {
				t.Errorf("%s: no %s description", name, lang)
			}
		}
		if hasHan(d.EnUS) {
			t.Errorf("%s: en_US text %q has Chinese characters", name, d.EnUS)
		}
		if !hasHan(d.ZhCN) {
			t.Errorf("%s: zh_CN text %q is not Chinese", name, d.ZhCN)
		}
		en, zh := verbs(d.EnUS), verbs(d.ZhCN)
		if !slices.Equal(en, zh) {
			t.Errorf("%s: en_US takes %v, zh_CN %v", name, en, zh)
		}
		e := New(time.Unix(1, 0), d, "id", sampleArgs(en)...)
		for _, lang := range Languages {
			if s := e.Describe(lang); BadArgs(s) {
				t.Errorf("%s %s: %q", name, lang, s)
			}
		}
		if got, ok := Lookup(d.Entity, d.Metric); !ok || got != d {
			t.Errorf("Lookup(%s) = %v, %v", name, got, ok)
		}
	}
	if _, ok := Lookup("cpu", "no_such_metric"); ok {
		t.Error("Lookup of an unknown metric succeeded")
	}
}

func TestNewAndDescribe(t *testing.T) {
	t0 := time.Unix(100, 0)
	e := New(t0, CPUTotalUsedPer, "cpu", 93.2)
	if e.Entity != "cpu" || e.Metric != "total_used_per" || e.EntityID != "cpu" || e.Severity != SeverityWarn || !e.Time.Equal(t0) {
		t.Errorf("event %+v", e)
	}
	if e.Message != "Too high cpu utilization(93.20%)." || e.Describe(EnUS) != e.Message {
		t.Errorf("en_US %q / %q", e.Message, e.Describe(EnUS))
	}
	if got := e.Describe(ZhCN); got != "过高的CPU占用率(93.20%)" {
		t.Errorf("zh_CN %q", got)
	}
	ext := Event{Entity: "custom", Metric: "m", Message: "as written"}
	if ext.Describe(ZhCN) != "as written" {
		t.Errorf("custom event described as %q", ext.Describe(ZhCN))
	}
}

func TestParseLanguage(t *testing.T) {
	for in, want := range map[string]Language{"": EnUS, "en_US": EnUS, "zh_CN": ZhCN} {
		if got, err := ParseLanguage(in); err != nil || got != want {
			t.Errorf("%q: %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"zh", "chinese", "EN_us", "fr_FR"} {
		if _, err := ParseLanguage(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}

// TestEventsComeFromTheCatalogue fails when code outside this package builds
// an event.Event literal instead of calling New with a catalogue entry: such
// an event would have no zh_CN text. Custom probes are the exception: their
// events carry the text their executable wrote.
func TestEventsComeFromTheCatalogue(t *testing.T) {
	root := filepath.Join("..", "..")
	exempt := map[string]bool{
		filepath.Join(root, "internal", "event"):           true,
		filepath.Join(root, "internal", "probe", "custom"): true,
	}
	fset := token.NewFileSet()
	files := 0
	for _, dir := range []string{filepath.Join(root, "internal"), filepath.Join(root, "cmd")} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if exempt[path] || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			// Every literal of the kinds below spells this.
			if !bytes.Contains(src, []byte("event.Event{")) {
				return nil
			}
			f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if isEventType(lit.Type) || isEventList(lit.Type) && len(lit.Elts) > 0 {
					t.Errorf("%s: builds an event.Event literal; raise events with event.New and a Desc of internal/event/catalogue.go",
						fset.Position(lit.Pos()))
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("walked only %d files: wrong root?", files)
	}
}

func isEventType(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "event" && sel.Sel.Name == "Event"
}

func isEventList(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.ArrayType:
		return isEventType(t.Elt)
	case *ast.MapType:
		return isEventType(t.Value)
	}
	return false
}
