// Package logpattern turns application log lines into counted message
// patterns: it unwraps the container runtimes' log formats (CRI and Docker
// json-file), groups the lines of one multi-line message (Java, Python and
// Go stack traces, indented continuations), detects a message's severity,
// masks its variable parts (numbers, ids, IP addresses, quoted strings) and
// clusters the masked messages into a bounded set of patterns.
//
// Everything here is pure (no I/O) and bounded: a line is cut at MaxLine
// bytes, what is kept of a message (its first line) at MaxTemplate, a pattern at MaxTemplate, a sample at MaxSample, and a Clusterer
// holds at most its cap of patterns (a message that would need one more is
// counted as overflow).
//
// Limits: severity is guessed from the first words of a message's first
// line (level names, key=value and JSON "level" fields, klog's I/W/E/F
// prefix); a message with none is LevelUnknown. Grouping is by the shape
// of the following lines only: a trace interleaved with another writer's
// lines on the same stream is split.
package logpattern
