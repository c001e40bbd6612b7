// Command galago is the eBPF node observability agent, a drop-in successor
// of gala-gopher: same config file, probes.init, REST API and exported data.
//
// Invoked as gopher-ctl (or `galago ctl ...`) it is the command-line client
// of the local control socket.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/galago-project/galago/internal/config"
	"github.com/galago-project/galago/internal/ctl"
)

// version is set at build time (-X main.version=...).
var version = "dev"

func main() {
	if filepath.Base(os.Args[0]) == "gopher-ctl" {
		os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr, ctlSocket()))
	}
	if len(os.Args) > 1 && os.Args[1] == "ctl" {
		os.Exit(ctl.Main(os.Args[2:], os.Stdout, os.Stderr, ctlSocket()))
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// ctlSocket is the control socket the client talks to: GALAGO_CTL_SOCKET,
// else the default path (the client's --socket flag overrides both).
func ctlSocket() string {
	if s := os.Getenv(ctl.SocketEnv); s != "" {
		return s
	}
	return config.Default().CmdSocket
}

const usage = `Usage: galago [-c|--config_path FILE] [-v|--version] [-h|--help]
       galago ctl probe get <feature>
       galago ctl probe set <feature> '<json>'
       gopher-ctl probe get|set ...   (galago invoked through a gopher-ctl link)
         the client's socket: --socket PATH, else $GALAGO_CTL_SOCKET, else cmd_socket's default

  -c, --config_path FILE   configuration file (default %s)
  -v, --version            print the version and exit
  -h, --help               print this help and exit
`

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("galago", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, usage, config.DefaultPath) }
	var path string
	var showVersion bool
	fs.StringVar(&path, "c", "", "")
	fs.StringVar(&path, "config_path", "", "")
	fs.BoolVar(&showVersion, "v", false, "")
	fs.BoolVar(&showVersion, "version", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "galago: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if showVersion {
		fmt.Fprintf(stderr, "galago %s\nCOMMIT_SHA1=%s\n", version, version)
		return 0
	}
	cfg, err := loadConfig(path)
	if err != nil {
		fmt.Fprintf(stderr, "galago: %v\n", err)
		return 1
	}
	if err := runDaemon(cfg); err != nil {
		fmt.Fprintf(stderr, "galago: %v\n", err)
		return 1
	}
	return 0
}

// loadConfig reads the file (the default path may be absent: built-in
// defaults), applies GOPHER_* variables and validates the result.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.ApplyEnv(os.Getenv); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}
