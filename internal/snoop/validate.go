package snoop

import (
	"fmt"
	"regexp"

	"github.com/galago-project/galago/internal/identity"
)

// Limits of gala-gopher's snoopers.
const (
	// MaxSelectors is the most selectors one snoopers or blacklist body
	// may hold.
	MaxSelectors = 100
	// MaxObjects is the most processes and containers one set resolves to.
	MaxObjects = 1000
	// MaxPID is the largest pid Linux can give (PID_MAX_LIMIT, the ceiling
	// of kernel.pid_max on 64-bit kernels): a larger proc_id names no
	// process that can ever exist.
	MaxPID = 4 * 1024 * 1024
)

// Field names as they appear in the REST body.
const (
	FieldProcID        = "proc_id"
	FieldProcName      = "proc_name"
	FieldPodID         = "pod_id"
	FieldContainerID   = "container_id"
	FieldContainerName = "container_name"
)

// ValidationError is a rejected snooper body. Its message starts with
// gala-gopher's ("Error occurs when parsing snooper <field>") and goes on
// with what was wrong; the REST API returns it as is.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	msg := "Error occurs when parsing snooper"
	if e.Field != "" {
		msg += " " + e.Field
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Validate checks a selector list as gala-gopher's parser does: pids are
// positive (and, unlike gala-gopher, at most MaxPID), comm is a POSIX extended regular expression, label names are
// valid metric label names, pod ids are uuids (or 32 hex digits), container
// ids are 1 to 64 hex digits, and there are at most MaxSelectors selectors.
// Empty strings are accepted and ignored, as gala-gopher ignores them.
func (s Selectors) Validate() error {
	if n := s.Count(); n > MaxSelectors {
		return &ValidationError{Reason: fmt.Sprintf("%d selectors, at most %d allowed", n, MaxSelectors)}
	}
	for _, pid := range s.ProcID {
		if pid <= 0 {
			return &ValidationError{FieldProcID, fmt.Sprintf("pid %d is not positive", pid)}
		}
		if pid > MaxPID {
			return &ValidationError{FieldProcID, fmt.Sprintf("pid %d is above %d, the largest pid Linux allows", pid, MaxPID)}
		}
	}
	for _, p := range s.ProcName {
		if _, err := regexp.CompilePOSIX(p.Comm); err != nil {
			return &ValidationError{FieldProcName, fmt.Sprintf("comm %q: %v", p.Comm, err)}
		}
		for k := range p.Label {
			if !labelName.MatchString(k) {
				return &ValidationError{FieldProcName, fmt.Sprintf("label name %q is not a valid label name", k)}
			}
		}
	}
	for _, id := range s.PodID {
		if id != "" && !identity.IsPodID(id) {
			return &ValidationError{FieldPodID, fmt.Sprintf("%q is not a pod uid", id)}
		}
	}
	for _, id := range s.ContainerID {
		if id != "" && !identity.IsContainerID(id) {
			return &ValidationError{FieldContainerID, fmt.Sprintf("%q is not a container id (1 to 64 hex digits)", id)}
		}
	}
	return nil
}
