package logpattern

import "strings"

// Message is one log message: a line and the continuation lines grouped
// with it.
type Message struct {
	// First is the message's first line, cut at MaxTemplate: all that
	// level detection, masking and the sample look at.
	First string
	// Lines is the number of lines, the first included.
	Lines int
	// Start is the position the caller gave with the first line (a file
	// offset), so it can resume before a message not yet complete.
	Start int64
}

// traceKind is the shape of trace a message started, which decides what
// continues it.
type traceKind uint8

const (
	plainMsg traceKind = iota
	pythonTrace
	goPanic
)

// Grouper assembles lines into messages: a line continues the message
// before it when it is indented (Java "\tat", Python "  File", Go frames'
// paths), is a "Caused by:" line or an exception line (java.lang.X: ...),
// or, in a Python traceback, is its closing "XxxError: ..." line, or, in a
// Go panic, is one of its goroutine headers, frames or "exit status" line.
// Empty lines are skipped. The zero value is ready.
type Grouper struct {
	cur    Message
	has    bool
	kind   traceKind
	closed bool // a Python traceback got its exception line
}

// Add takes one line (without its newline) at position off. When the line
// starts a new message, the previous one is complete and returned.
func (g *Grouper) Add(line []byte, off int64) (Message, bool) {
	if len(line) > MaxLine {
		line = line[:MaxLine]
	}
	if isBlank(line) {
		return Message{}, false
	}
	if g.has && g.continues(line) {
		g.cur.Lines++
		return Message{}, false
	}
	done, ok := g.cur, g.has
	first := line
	if len(first) > MaxTemplate {
		first = first[:MaxTemplate]
	}
	g.cur = Message{First: string(first), Lines: 1, Start: off}
	g.has, g.closed = true, false
	switch {
	case strings.HasPrefix(g.cur.First, "Traceback (most recent call last)"):
		g.kind = pythonTrace
	case strings.HasPrefix(g.cur.First, "panic: ") || strings.HasPrefix(g.cur.First, "fatal error: "):
		g.kind = goPanic
	default:
		g.kind = plainMsg
	}
	return done, ok
}

// Flush returns the message being assembled, if any, as complete.
func (g *Grouper) Flush() (Message, bool) {
	m, ok := g.cur, g.has
	g.cur, g.has = Message{}, false
	return m, ok
}

// Pending reports the position of the message being assembled.
func (g *Grouper) Pending() (int64, bool) { return g.cur.Start, g.has }

func (g *Grouper) continues(line []byte) bool {
	if line[0] == ' ' || line[0] == '\t' {
		return true
	}
	s := string(line)
	if strings.HasPrefix(s, "Caused by: ") || strings.HasPrefix(s, "Suppressed: ") {
		return true
	}
	switch g.kind {
	case pythonTrace:
		if !g.closed && isExceptionLine(s, false) {
			g.closed = true
			return true
		}
		return false
	case goPanic:
		return strings.HasPrefix(s, "goroutine ") || strings.HasPrefix(s, "created by ") ||
			strings.HasPrefix(s, "exit status ") || strings.HasPrefix(s, "[signal ") || isGoFrame(s)
	}
	return isExceptionLine(s, true)
}

// isExceptionLine reports a line that names an exception class before a
// colon or alone: "java.lang.IllegalStateException: boom" or, with dotted
// false, "ValueError: bad".
func isExceptionLine(s string, dotted bool) bool {
	end := strings.IndexAny(s, ": ")
	if end < 0 {
		end = len(s)
	} else if s[end] == ' ' {
		return false
	}
	name := s[:end]
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isClassChar(c) {
			return false
		}
	}
	if dotted && !strings.Contains(name, ".") {
		return false
	}
	return strings.HasSuffix(name, "Exception") || strings.HasSuffix(name, "Error") ||
		strings.HasSuffix(name, "Exit") || strings.HasSuffix(name, "Interrupt")
}

// isClassChar reports the characters of a Java or Python class name.
func isClassChar(c byte) bool {
	return isLetter(c) || isDigit(c) || c == '_' || c == '.' || c == '$'
}

// isGoFrame reports a Go stack frame's function line: pkg.Func(args) with
// no space before the parenthesis.
func isGoFrame(s string) bool {
	open := strings.IndexByte(s, '(')
	return open > 0 && strings.HasSuffix(s, ")") && !strings.ContainsAny(s[:open], " \t")
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}
