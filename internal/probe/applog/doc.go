// Package applog is galago's log pattern extraction feature (applog;
// gala-gopher has none, the idea is coroot-node-agent's). For the observed
// processes (snoopers, or a blacklist) it follows
//
//   - with sub-item container_log, the logs of their containers: Docker's
//     json-file log (<docker root>/containers/<id>/<id>-json.log) and the
//     CRI log kubelet's runtimes write, found through
//     <log root>/containers/*-<id>.log or, when no such link exists, as the
//     newest <n>.log of <log root>/pods/<ns>_<pod>_<uid>/<container name>/
//     (pod uid from the cgroup path, name from the runtime's state);
//   - with sub-item file_log, the regular files under the log root
//     (/var/log) a process has open for writing, found in /proc/<pid>/fd and
//     fdinfo (no kprobe), read through /proc/<pid>/root for a process in a
//     container.
//
// Each message (multi-line messages such as stack traces grouped, CRI and
// Docker partial lines joined) gets a level and a pattern from
// internal/logpattern, and is counted per source (the container, else the
// systemd unit, else the process), level and pattern in table app_log:
// gauges messages and lines per report period, with the pattern's template
// and one sample message as labels. A source holds at most 256 patterns;
// messages past the cap are counted under pattern "overflow".
//
// Following files. Files are read every second, and looked for every
// five seconds (at once when the snoopers' set changes); they are
// named by device and inode, so a file renamed by rotation is read to its
// end under its new name while its successor at the old name is read from
// its start; a file truncated in place is read again from its start. A
// file first seen is read from its offset saved in the offsets file if its
// inode and birth time match, else from its start if it was born after the
// probe started, else from its end: a restart never reads a file from the
// start again. The offsets saved are those of the last report, placed
// before any message still being assembled: counts of a period cut short by
// a stop are not reported, and the next start counts those messages.
//
// Bounds: 1024 sources, 4096 files, 8 MiB read per poll (1 MiB per file;
// a file written faster is read over the next polls), lines cut at 16 KiB,
// 4096 entries in the offsets file.
//
// galago's own files (its metric, event and debug logs under /var/log) are
// never read: galago is never among the observed processes.
//
// A file no discovery finds any more is read up to its size at that moment
// and let go (its offset kept).
//
// Limits: a file that an observed process opens, writes and closes between
// two walks (five seconds) is not seen; a trace interleaved
// with another stream's lines in a CRI file is split; a file system
// without birth times reads every file first seen from its end (or saved
// offset), including files created after the start.
package applog
