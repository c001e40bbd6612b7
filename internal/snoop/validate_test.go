package snoop

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	many := Selectors{}
	for i := 1; i <= 101; i++ {
		many.ProcID = append(many.ProcID, i)
	}
	hundred := Selectors{ProcID: many.ProcID[:60], ContainerName: make([]string, 40)}
	for _, tc := range []struct {
		name  string
		sel   Selectors
		field string // "" = valid
	}{
		{"empty", Selectors{}, ""},
		{"all kinds", Selectors{
			ProcID:        []int{1, 4242},
			ProcName:      []ProcName{{Comm: "^java$", Cmdline: "kafka", Label: map[string]string{"app": "kafka"}}, {Comm: "nginx|redis-[a-z]+"}},
			PodID:         []string{"0f9c2a3e-1111-2222-3333-444455556666", "6b24ef32c1d4a6cf07c8f1b2f5a0e9d3"},
			ContainerID:   []string{"9f86d081884c", strings.Repeat("ab", 32), "ABCDEF"},
			ContainerName: []string{"redis"},
		}, ""},
		{"empty strings are ignored, not rejected", Selectors{PodID: []string{""}, ContainerID: []string{""}, ProcName: []ProcName{{}}}, ""},
		{"POSIX classes", Selectors{ProcName: []ProcName{{Comm: "^[[:alpha:]]+d$"}}}, ""},
		{"exactly 100 selectors", hundred, ""},
		{"zero pid", Selectors{ProcID: []int{0}}, FieldProcID},
		{"negative pid", Selectors{ProcID: []int{5, -1}}, FieldProcID},
		{"largest pid", Selectors{ProcID: []int{MaxPID}}, ""},
		{"pid above pid_max", Selectors{ProcID: []int{99999999999}}, FieldProcID},
		{"comm does not compile", Selectors{ProcName: []ProcName{{Comm: "java("}}}, FieldProcName},
		{"comm uses Perl syntax outside POSIX ERE", Selectors{ProcName: []ProcName{{Comm: `\d+`}}}, FieldProcName},
		{"label name not a metric label", Selectors{ProcName: []ProcName{{Comm: "java", Label: map[string]string{"my-app": "x"}}}}, FieldProcName},
		{"pod id too short", Selectors{PodID: []string{"0f9c2a3e-1111"}}, FieldPodID},
		{"pod id not hex", Selectors{PodID: []string{"0f9c2a3e-1111-2222-3333-44445555666z"}}, FieldPodID},
		{"pod id dashes misplaced", Selectors{PodID: []string{"0f9c2a3e1-111-2222-3333-444455556666"}}, FieldPodID},
		{"container id not hex", Selectors{ContainerID: []string{"web-1"}}, FieldContainerID},
		{"container id too long", Selectors{ContainerID: []string{strings.Repeat("a", 65)}}, FieldContainerID},
		{"101 selectors", many, "count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sel.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if tc.field == "count" {
				if want := "Error occurs when parsing snooper: 101 selectors, at most 100 allowed"; err.Error() != want {
					t.Errorf("message %q, want %q", err, want)
				}
				return
			}
			// gala-gopher's text first, then the reason.
			if want := "Error occurs when parsing snooper " + tc.field + ": " + ve.Reason; ve.Reason == "" || err.Error() != want {
				t.Errorf("message %q, want %q with a reason", err, want)
			}
		})
	}
}
