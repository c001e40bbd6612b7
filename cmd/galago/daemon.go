package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/api"
	"github.com/galago-project/galago/internal/bpfrt"
	"github.com/galago-project/galago/internal/config"
	"github.com/galago-project/galago/internal/event"
	"github.com/galago-project/galago/internal/exetrim"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/output"
	"github.com/galago-project/galago/internal/output/otlptrace"
	"github.com/galago-project/galago/internal/probe"
	"github.com/galago-project/galago/internal/probe/applog"
	"github.com/galago-project/galago/internal/probe/baseinfo"
	"github.com/galago-project/galago/internal/probe/container"
	"github.com/galago-project/galago/internal/probe/custom"
	"github.com/galago-project/galago/internal/probe/dbsli"
	"github.com/galago-project/galago/internal/probe/flamegraph"
	"github.com/galago-project/galago/internal/probe/flowtracer"
	"github.com/galago-project/galago/internal/probe/hw"
	ioprobe "github.com/galago-project/galago/internal/probe/io"
	"github.com/galago-project/galago/internal/probe/jvm"
	kafkaprobe "github.com/galago-project/galago/internal/probe/kafka"
	l7probe "github.com/galago-project/galago/internal/probe/l7"
	"github.com/galago-project/galago/internal/probe/lvs"
	"github.com/galago-project/galago/internal/probe/nginx"
	"github.com/galago-project/galago/internal/probe/opengauss"
	procprobe "github.com/galago-project/galago/internal/probe/proc"
	"github.com/galago-project/galago/internal/probe/sli"
	"github.com/galago-project/galago/internal/probe/socket"
	"github.com/galago-project/galago/internal/probe/tcp"
	"github.com/galago-project/galago/internal/probe/tprofiling"
	"github.com/galago-project/galago/internal/probe/virt"
	"github.com/galago-project/galago/internal/procfs"
	"github.com/galago-project/galago/internal/proctrack"
	"github.com/galago-project/galago/internal/snoop"
	"github.com/galago-project/galago/internal/sockowner"
	"github.com/galago-project/galago/internal/syscap"
	"github.com/galago-project/galago/internal/table"
)

// runDaemon builds every component from cfg, runs until SIGINT or SIGTERM,
// then stops every probe, saves the running probe configuration to
// probes.init and removes its pid file and socket.
func runDaemon(cfg *config.Config) error {
	defaultGCPercent()
	log, closeLog, err := newLogger(cfg)
	if err != nil {
		return err
	}
	defer closeLog()
	for _, w := range cfg.Warnings() {
		log.Debug("config", "note", w)
	}

	unlock, err := lockPIDFile(cfg.PIDFile)
	if err != nil {
		return err
	}
	defer unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	host, err := identity.Host(cfg.HostPath)
	if err != nil {
		return fmt.Errorf("host identity: %w", err)
	}
	log.Info("galago starting", "version", version, "machine_id", host.MachineID(), "host_path", cfg.HostPath)

	ids := identity.NewResolver(cfg.HostPath)
	if err := ids.EnableRuntimes(identity.Runtimes{
		CRI:        cfg.CRISockets(),
		Containerd: cfg.ContainerdSocket,
		Docker:     cfg.DockerSocket,
	}, log.With("component", "identity")); err != nil {
		return fmt.Errorf("container runtimes: %w", err)
	}
	go ids.RunRuntimes(ctx)
	store := table.NewStore(table.Limits{
		MaxTables:  cfg.IMDB.MaxTablesNum,
		MaxRecords: cfg.IMDB.MaxRecordsNum,
		MaxMetrics: cfg.IMDB.MaxMetricsNum,
		Timeout:    time.Duration(cfg.IMDB.RecordTimeout) * time.Second,
	}, identity.NewEnricher(ids, host), nil)

	exporter, err := output.NewExporter(store, log)
	if err != nil {
		return err
	}
	pipe := output.NewPipeline(output.PipelineConfig{
		Store:        store,
		Exporter:     exporter,
		EventTimeout: time.Duration(cfg.Event.Timeout) * time.Second,
		Language:     event.Language(cfg.Event.DescLanguage),
		Log:          log,
	})
	kafka, err := addSinks(cfg, pipe, host, log)
	if err != nil {
		return err
	}
	if kafka != nil {
		defer kafka.Close() // after the pipeline: it delivers what the last writes queued
		if err := exporter.Register(kafka); err != nil {
			return err
		}
	}
	defer pipe.Close()

	bpfStats, err := bpfrt.StatsFromEnv(log)
	if err != nil {
		return err
	}
	resolver := snoop.NewResolver(cfg.HostPath, ids, os.Getpid(), log)
	defer resolver.Close()
	if stop := trackProcesses(ctx, cfg.HostPath, resolver, ids, exporter, bpfStats, log); stop != nil {
		defer stop()
	}
	mgr := probe.NewManager(ctx, log, pipe, watcher{resolver})
	fsys := procfs.FS{Root: cfg.HostPath}
	missing := bpfrt.NewMissingHooks(log)
	mgr.Register(baseinfo.Name, func() probe.Probe { return baseinfo.New(fsys, baseinfo.WithIdentity(ids)) })
	mgr.Register(container.Name, func() probe.Probe {
		return container.New(fsys, ids, container.WithStats(bpfStats), container.WithMissingHooks(missing))
	})
	// flowtracer's real clients, read by tcp and l7 with cluster_ip_backend=2.
	origins := flowtracer.NewOrigins()
	mgr.Register(flowtracer.Name, func() probe.Probe {
		return flowtracer.New(flowtracer.WithOrigins(origins), flowtracer.WithStats(bpfStats), flowtracer.WithMissingHooks(missing))
	})
	// One socket owner storage for tcp and socket: one element per socket.
	owners := sockowner.NewShared()
	mgr.Register(tcp.Name, func() probe.Probe {
		return tcp.New(tcp.WithStats(bpfStats), tcp.WithMissingHooks(missing), tcp.WithOrigins(origins), tcp.WithOwners(owners))
	})
	mgr.Register(socket.Name, func() probe.Probe {
		return socket.New(socket.WithStats(bpfStats), socket.WithMissingHooks(missing), socket.WithOwners(owners))
	})
	mgr.Register(ioprobe.Name, func() probe.Probe {
		return ioprobe.New(ioprobe.WithStats(bpfStats), ioprobe.WithMissingHooks(missing), ioprobe.WithHostPath(cfg.HostPath))
	})
	// One syscall capture for l7 and the ksli and postgre_sli views.
	capture := syscap.NewShared(syscap.Options{Log: log.With("component", "syscap"), HostPath: cfg.HostPath, RingSize: cfg.L7RingbufMB << 20})
	l7opts := []l7probe.Option{l7probe.WithStats(bpfStats), l7probe.WithMissingHooks(missing), l7probe.WithHostPath(cfg.HostPath), l7probe.WithShared(capture), l7probe.WithOrigins(origins)}
	if cfg.OTLP.TracesPercent > 0 {
		spans, err := startTraces(ctx, cfg, exporter, host, log)
		if err != nil {
			return err
		}
		defer func() {
			sctx, done := context.WithTimeout(context.Background(), 10*time.Second)
			defer done()
			if err := spans.Close(sctx); err != nil {
				log.Warn("otlp traces: closing", "err", err)
			}
		}()
		l7opts = append(l7opts, l7probe.WithSpans(spans))
	}
	mgr.Register(l7probe.Name, func() probe.Probe { return l7probe.New(l7opts...) })
	mgr.Register(l7probe.SermantName, func() probe.Probe {
		return l7probe.NewSermant(l7probe.WithMissingHooks(missing), l7probe.WithHostPath(cfg.HostPath), l7probe.WithShared(capture))
	})
	mgr.Register(dbsli.KSLIName, func() probe.Probe {
		return dbsli.NewKSLI(dbsli.WithShared(capture), dbsli.WithHostPath(cfg.HostPath))
	})
	mgr.Register(dbsli.PostgreSLIName, func() probe.Probe {
		return dbsli.NewPostgreSLI(dbsli.WithShared(capture), dbsli.WithHostPath(cfg.HostPath))
	})
	mgr.Register(kafkaprobe.Name, func() probe.Probe {
		return kafkaprobe.New(kafkaprobe.WithShared(capture), kafkaprobe.WithHostPath(cfg.HostPath))
	})
	mgr.Register(nginx.Name, func() probe.Probe {
		return nginx.New(nginx.WithStats(bpfStats), nginx.WithHostPath(cfg.HostPath))
	})
	mgr.Register(opengauss.Name, func() probe.Probe {
		return opengauss.New(opengauss.WithConf(cfg.PgStatConf), opengauss.WithHostPath(cfg.HostPath))
	})
	mgr.Register(procprobe.Name, func() probe.Probe {
		return procprobe.New(procprobe.WithStats(bpfStats), procprobe.WithMissingHooks(missing), procprobe.WithHostPath(cfg.HostPath))
	})
	mgr.Register(sli.Name, func() probe.Probe {
		return sli.New(fsys, ids, sli.WithStats(bpfStats), sli.WithMissingHooks(missing))
	})
	mgr.Register(hw.Name, func() probe.Probe {
		return hw.New(hw.WithStats(bpfStats), hw.WithMissingHooks(missing), hw.WithHostPath(cfg.HostPath))
	})
	mgr.Register(virt.Name, func() probe.Probe { return virt.New(fsys) })
	mgr.Register(jvm.Name, func() probe.Probe { return jvm.New(fsys) })
	mgr.Register(lvs.Name, func() probe.Probe { return lvs.New(fsys) })
	mgr.Register(applog.Name, func() probe.Probe { return applog.New(applogOptions(cfg, ids)...) })
	profiles := flamegraph.NewHub()
	mgr.Register(flamegraph.Name, func() probe.Probe {
		return flamegraph.New(flamegraph.WithStats(bpfStats), flamegraph.WithMissingHooks(missing), flamegraph.WithHostPath(cfg.HostPath), flamegraph.WithHub(profiles), flamegraph.WithIdentity(ids))
	})
	timeline := tprofiling.NewHub()
	mgr.Register(tprofiling.Name, func() probe.Probe {
		return tprofiling.New(tprofiling.WithStats(bpfStats), tprofiling.WithMissingHooks(missing), tprofiling.WithHostPath(cfg.HostPath), tprofiling.WithHub(timeline), tprofiling.WithIdentity(ids))
	})
	if err := addCustomProbes(cfg, mgr); err != nil {
		return err
	}
	// The agent's own CPU and memory (process_*), as every Prometheus
	// exporter serves them: the health dashboard and the overhead budget.
	self := []prometheus.Collector{pipe, mgr, ids.RuntimeCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	if bpfStats != nil {
		self = append(self, bpfStats)
	}
	if err := exporter.Register(self...); err != nil {
		return err
	}

	if cfg.Metric.OutChannel.Has(config.ChannelOTLP) {
		otlp, err := startOTLP(ctx, cfg, exporter, host, log)
		if err != nil {
			return err
		}
		defer func() {
			sctx, done := context.WithTimeout(context.Background(), 10*time.Second)
			defer done()
			if err := otlp.Close(sctx); err != nil {
				log.Warn("otlp: closing", "err", err)
			}
		}()
	}

	go pipe.RunExpiry(ctx)
	go pipe.RunMeta(ctx, mgr.Tables)

	startProfiler(log)
	servers, err := startServers(cfg, exporter, mgr, log, map[string]http.Handler{flamegraph.PprofPath: profiles,
		tprofiling.TimelinePath: timeline, tprofiling.TracePath: timeline})
	if err != nil {
		mgr.StopAll()
		return err
	}

	// Once start-up and each probe change are over, the executable's
	// pages they touched go back to the kernel (19 MiB of RSS at rest).
	trim := exetrim.New(exetrim.DefaultQuiet, log.With("component", "exetrim"))
	mgr.OnChange(trim.Kick)
	go trim.Run(ctx)

	initFile := applyProbesInit(cfg, mgr, log)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	var serveErr error
	select {
	case s := <-sigs:
		log.Info("galago stopping", "signal", s.String())
	case serveErr = <-servers.failed:
		log.Error("server failed; stopping", "err", serveErr)
	}

	saveProbesInit(cfg, initFile, mgr, log)
	mgr.StopAll()
	servers.shutdown(log)
	cancel()
	log.Info("galago stopped")
	return serveErr
}

// trackProcesses feeds process starts and exits from the sched_process_*
// tracepoints to the snooper resolver, so a matching process is observed at
// exec time rather than at the next /proc scan, and containers' cgroups
// made and removed (cgroup_mkdir, cgroup_rmdir) to it and to identity, so
// a container is known and observed as it starts and forgotten as it
// goes. Without BPF the resolver's /proc scan (every 250 ms) still finds
// processes; that is logged once.
func trackProcesses(ctx context.Context, hostPath string, r *snoop.Resolver, ids *identity.CachingResolver, exp *output.Exporter,
	stats *bpfrt.Stats, log *slog.Logger) func() {
	var lost atomic.Uint64
	t, err := proctrack.Open(proctrack.Options{Log: log, OnLost: func(n uint64) { lost.Add(n) }})
	if err != nil {
		log.Warn("process lifecycle tracepoints unavailable: snoopers follow processes by scanning /proc only", "err", err)
		return nil
	}
	if err := exp.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "galago_proctrack_events_lost_total",
		Help: "Process lifecycle events (fork, exec, exit) lost to a full ring buffer; the /proc scan still catches those processes.",
	}, func() float64 { return float64(lost.Load()) })); err != nil {
		log.Warn("proctrack self-metric", "err", err)
	}
	if err := exp.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "galago_snoop_exited_evicted_total",
		Help: "Exited processes a snooper set forgot before its grace period ended because it held too many (" +
			strconv.Itoa(snoop.MaxExited) + "): rows they left after that are no longer attributed to them.",
	}, func() float64 { return float64(r.ExitedEvicted()) })); err != nil {
		log.Warn("snoop self-metric", "err", err)
	}
	if err := exp.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "galago_identity_live_containers_dropped_total",
		Help: "Containers whose cgroups were made while " + strconv.Itoa(identity.DefaultMaxContainers) +
			" were live: not known until a process of theirs is seen.",
	}, func() float64 { return float64(ids.LiveDropped()) })); err != nil {
		log.Warn("identity self-metric", "err", err)
	}
	stats.TryRegister(log, "proctrack", t.Programs())
	t.Subscribe(func(e proctrack.Event) {
		switch e.Type {
		case proctrack.Exec, proctrack.Fork:
			r.Notify(e.Process())
		case proctrack.Exit:
			r.NotifyExit(int(e.TGID))
		case proctrack.CgroupMkdir, proctrack.CgroupRmdir:
			r.NotifyCgroup(e.Cgroup())
		}
	})
	r.SetHandledThrough(t.HandledThrough)
	if t.Cgroups() {
		// Containers that existed before galago started are live as those
		// made from now on (after Subscribe: none made in between is missed).
		evs, err := identity.ScanCgroups(hostPath)
		if err != nil {
			log.Warn("cgroup scan: containers that already ran are known from their processes only", "err", err)
		}
		for _, ev := range evs {
			r.NotifyCgroup(ev)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := t.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("process lifecycle tracking stopped", "err", err)
		}
	}()
	return func() {
		stats.Unregister("proctrack")
		t.Close()
		<-done
	}
}

// watcher adapts the snoop resolver to the Manager's Watcher.
type watcher struct{ r *snoop.Resolver }

func (w watcher) Watch(sel snoop.Selectors, mode snoop.Mode) probe.WatchedTargets {
	return w.r.Watch(sel, mode)
}

// addSinks adds the metric, event and metadata channels of the config.
// The kafka channels share one producer, returned (nil when no channel is
// kafka) so that its self-metrics are registered and it is closed after
// the pipeline.
func addSinks(cfg *config.Config, pipe *output.Pipeline, host output.Host, log *slog.Logger) (kafka *output.KafkaProducer, err error) {
	defer func() {
		if err != nil && kafka != nil {
			kafka.Close()
			kafka = nil
		}
	}()
	if cfg.Metric.OutChannel.Has(config.ChannelKafka) || cfg.Event.OutChannel == config.ChannelKafka || cfg.Meta.OutChannel == config.ChannelKafka {
		if kafka, err = newKafkaProducer(cfg.Kafka, log); err != nil {
			return nil, err
		}
		log.Info("kafka producer started", "brokers", cfg.Kafka.Broker)
	}
	for _, ch := range cfg.Metric.OutChannel.List() {
		switch ch {
		case config.ChannelLogs:
			s, err := output.NewMetricTextSink(cfg.Logs.MetricDir, cfg.Logs.MetricTotalSize)
			if err != nil {
				return kafka, err
			}
			pipe.AddMetricSink("logs", s)
		case config.ChannelJSON:
			s, err := output.NewMetricJSONSink(cfg.Logs.MetricDir, cfg.Logs.MetricTotalSize)
			if err != nil {
				return kafka, err
			}
			pipe.AddMetricSink("json", s)
		case config.ChannelKafka:
			pipe.AddMetricSink("kafka", output.NewMetricKafkaSink(kafka, cfg.Metric.KafkaTopic, host.UUID))
		}
	}
	switch cfg.Event.OutChannel {
	case config.ChannelLogs:
		s, err := output.NewEventLogSink(cfg.Logs.EventDir, host, time.Local)
		if err != nil {
			return kafka, err
		}
		pipe.AddEventSink("logs", s)
	case config.ChannelKafka:
		pipe.AddEventSink("kafka", output.NewEventKafkaSink(kafka, cfg.Event.KafkaTopic, host, time.Local))
	}
	switch cfg.Meta.OutChannel {
	case config.ChannelLogs:
		s, err := output.NewMetaLogSink(cfg.Logs.MetaDir)
		if err != nil {
			return kafka, err
		}
		pipe.AddMetaSink("logs", s)
	case config.ChannelKafka:
		pipe.AddMetaSink("kafka", output.NewMetaKafkaSink(kafka, cfg.Meta.KafkaTopic))
	}
	return kafka, nil
}

// startOTLP starts the otlp metric channel over the exporter's registry
// and registers its own counters there.
func startOTLP(ctx context.Context, cfg *config.Config, exp *output.Exporter, host output.Host, log *slog.Logger) (*output.OTLP, error) {
	o, err := output.StartOTLP(ctx, output.OTLPOptions{
		Gatherer: exp.Gatherer(),
		Host:     host,
		Version:  version,
		Protocol: cfg.OTLP.Protocol,
		Endpoint: cfg.OTLP.Endpoint,
		Insecure: cfg.OTLP.Insecure,
		Interval: time.Duration(cfg.OTLP.ExportInterval) * time.Second,
		Log:      log,
	})
	if err != nil {
		return nil, err
	}
	if err := exp.Register(o); err != nil {
		return nil, err
	}
	log.Info("otlp metric channel started", "protocol", output.OTLPProtocol(cfg.OTLP.Protocol), "endpoint", cfg.OTLP.Endpoint)
	return o, nil
}

// startTraces starts the OTLP span exporter of l7's exchanges
// (galago.otlp_traces_percent) and registers its counters.
func startTraces(ctx context.Context, cfg *config.Config, exp *output.Exporter, host output.Host, log *slog.Logger) (*otlptrace.Exporter, error) {
	t, err := otlptrace.Start(ctx, otlptrace.Options{
		Host: host, Version: version, Protocol: cfg.OTLP.Protocol, Endpoint: cfg.OTLP.Endpoint,
		Insecure: cfg.OTLP.Insecure, Ratio: float64(cfg.OTLP.TracesPercent) / 100, Log: log,
	})
	if err != nil {
		return nil, err
	}
	if err := exp.Register(t); err != nil {
		return nil, err
	}
	log.Info("otlp traces of l7 exchanges started", "percent", cfg.OTLP.TracesPercent, "endpoint", cfg.OTLP.Endpoint)
	return t, nil
}

// newKafkaProducer maps the kafka section and galago's Kafka TLS and SASL
// settings to the producer.
func newKafkaProducer(k config.Kafka, log *slog.Logger) (*output.KafkaProducer, error) {
	var brokers []string
	for _, b := range strings.Split(k.Broker, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	o := output.KafkaOptions{
		Brokers:          brokers,
		Compression:      k.CompressionCodec,
		BatchNumMessages: k.BatchNumMessages,
		MaxMessages:      k.QueueBufferingMaxMessages,
		MaxBytes:         int64(k.QueueBufferingMaxKbytes) * 1024,
		Linger:           time.Duration(k.QueueBufferingMaxMs) * time.Millisecond,
		Log:              log.With("sink", "kafka"),
	}
	var err error
	if k.TLS {
		if o.TLS, err = output.ClientTLSConfig(k.TLSCAFile, k.TLSCertFile, k.TLSKeyFile); err != nil {
			return nil, fmt.Errorf("galago.kafka_tls: %w", err)
		}
	}
	if o.SASL, err = output.KafkaSASL(k.SASLMechanism, k.SASLUsername, k.SASLPassword); err != nil {
		return nil, fmt.Errorf("galago.kafka_sasl_mechanism: %w", err)
	}
	return output.NewKafkaProducer(o)
}

// addCustomProbes declares the third-party probes of gala-gopher-custom.json;
// like gala-gopher, an invalid declaration stops start-up.
func addCustomProbes(cfg *config.Config, mgr *probe.Manager) error {
	feats, err := custom.LoadDecls(cfg.CustomJSONFile)
	if err != nil {
		return err
	}
	for _, f := range feats {
		factory, err := custom.Factory(f)
		if err != nil {
			return err
		}
		if err := mgr.AddCustom(f, factory); err != nil {
			return err
		}
	}
	return nil
}

// servers are the listening endpoints of the daemon.
type servers struct {
	metrics *output.Server
	rest    *api.Server
	ctl     *api.CtlServer
	failed  chan error
}

func (s *servers) shutdown(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.rest != nil {
		if err := s.rest.Shutdown(ctx); err != nil {
			log.Warn("rest api shutdown", "err", err)
		}
	}
	if s.metrics != nil {
		if err := s.metrics.Shutdown(ctx); err != nil {
			log.Warn("metrics server shutdown", "err", err)
		}
	}
	if err := s.ctl.Shutdown(ctx); err != nil {
		log.Warn("control socket shutdown", "err", err)
	}
}

// startServers binds every endpoint before returning, so a busy port stops
// start-up with a clear error.
func startServers(cfg *config.Config, exp *output.Exporter, mgr *probe.Manager, log *slog.Logger, extra map[string]http.Handler) (*servers, error) {
	s := &servers{failed: make(chan error, 3)}
	s.ctl = api.NewCtlServer(cfg.CmdSocket, mgr, log)
	if err := s.ctl.Listen(); err != nil {
		return nil, err
	}
	go func() {
		if err := s.ctl.Serve(); err != nil {
			s.failed <- fmt.Errorf("control socket: %w", err)
		}
	}()
	if cfg.Metric.OutChannel.Has(config.ChannelWebServer) {
		tlsCfg, err := serverTLS(cfg.WebServer)
		if err != nil {
			return nil, fmt.Errorf("web_server: %w", err)
		}
		addr := net.JoinHostPort(cfg.WebServer.BindAddr, strconv.Itoa(cfg.WebServer.Port))
		if s.metrics, err = output.StartServer(addr, exp.Handler(), tlsCfg, log); err != nil {
			return nil, fmt.Errorf("web_server: %w", err)
		}
	}
	if cfg.Global.RestAPIOn {
		tlsCfg, err := serverTLS(cfg.RestAPIServer)
		if err != nil {
			return nil, fmt.Errorf("rest_api_server: %w", err)
		}
		addr := net.JoinHostPort(cfg.RestAPIServer.BindAddr, strconv.Itoa(cfg.RestAPIServer.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("rest_api_server: %w", err)
		}
		s.rest = api.NewServer(api.ServerConfig{Addr: addr, TLS: tlsCfg, Extra: extra}, mgr, log)
		go func() {
			if err := s.rest.Serve(ln); err != nil {
				s.failed <- fmt.Errorf("rest api: %w", err)
			}
		}()
	}
	return s, nil
}

func serverTLS(s config.HTTPServer) (*tls.Config, error) {
	if !s.TLS() {
		return nil, nil
	}
	return output.ServerTLSConfig(s.CertFile, s.PrivateKey, s.CAFile)
}

// applyProbesInit applies probes.init through the same path as gopher-ctl.
// A bad or refused line is logged with its line number and skipped: the
// others still apply. One line sums up how many lines were applied,
// refused and skipped (blank or comment). It returns the file as read, its
// applied lines marked, for saveProbesInit; nil when the file could not be
// read, which must then not be overwritten.
func applyProbesInit(cfg *config.Config, mgr *probe.Manager, log *slog.Logger) *config.InitFile {
	f, err := cfg.ProbesInit()
	if err != nil {
		log.Error("probes.init not read: no probe started from it, and it will not be rewritten on stop", "err", err)
		return nil
	}
	applied, refused, skipped := 0, 0, 0
	for i := range f.Entries {
		e := &f.Entries[i]
		switch {
		case e.Skipped():
			skipped++
		case e.Err != nil:
			refused++
			log.Error("probes.init line refused", "line", f.Where(e.Num), "err", e.Err.Msg)
		default:
			if err := mgr.Put(e.Probe.Feature, []byte(e.Probe.JSON)); err != nil {
				refused++
				log.Error("probes.init line refused", "line", f.Where(e.Num), "feature", e.Probe.Feature, "err", err)
				continue
			}
			e.Applied = true
			applied++
			log.Info("probes.init line applied", "line", f.Where(e.Num), "feature", e.Probe.Feature)
		}
	}
	if len(f.Entries) == 0 {
		log.Info("probes.init is absent or empty: no probe started from it", "source", f.Source)
	} else {
		log.Info("probes.init read", "source", f.Source, "applied", applied, "refused", refused, "skipped", skipped)
	}
	return f
}

// saveProbesInit writes the running configuration back to probes.init, as
// gala-gopher's init_probes.sh --save does on stop: one line per configured
// feature, with the labels GET leaves out. Unlike the script it keeps every
// line galago did not apply (comments, malformed lines, features it does
// not have yet) as it was; see config.InitFile.Rewrite.
func saveProbesInit(cfg *config.Config, f *config.InitFile, mgr *probe.Manager, log *slog.Logger) {
	if f == nil {
		log.Error("probes.init not saved: it could not be read at start", "path", cfg.ProbesInitFile)
		return
	}
	var running []config.InitLine
	for _, name := range mgr.Names() {
		b, err := mgr.Saved(name)
		if err != nil {
			continue
		}
		b = bytes.TrimSpace(b)
		if string(b) == "{}" {
			continue
		}
		running = append(running, config.InitLine{Feature: name, JSON: string(b)})
	}
	data, probes, err := f.Rewrite(running, canonicalFeature)
	if err != nil {
		log.Error("probes.init not saved", "err", err)
		return
	}
	if probes > config.MaxProbesInitLines {
		log.Warn(fmt.Sprintf("probes.init holds %d probe lines; those after the %dth will be refused at the next start", probes, config.MaxProbesInitLines),
			"path", cfg.ProbesInitFile)
	}
	if err := writeFileAtomic(cfg.ProbesInitFile, data, 0o640); err != nil {
		log.Error("probes.init not saved", "err", err)
		return
	}
	log.Info("probes.init saved", "path", cfg.ProbesInitFile, "features", len(running), "probe_lines", probes)
}

// canonicalFeature is the name a probes.init feature resolves to: built-in
// names match case-insensitively, custom ones exactly.
func canonicalFeature(name string) string {
	if def := probe.LookupBuiltin(name); def != nil {
		return def.Name
	}
	return name
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".probes.init-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// lockPIDFile takes gala-gopher's singleton lock: an exclusive flock on the
// pid file, which holds our pid. The returned func releases and removes it.
func lockPIDFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("another instance (pid %s) holds %s: %w", bytes.TrimSpace(holder), path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pid file: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("pid file: %w", err)
	}
	return func() {
		os.Remove(path)
		f.Close()
	}, nil
}

// gcPercent is the daemon's garbage collection target unless GOGC is set:
// the heap may grow by half its live size, not by all of it, before a
// collection. The daemon's steady allocation is ~1 MB/s and its live heap
// a few MB, so this is a collection every 2.5-5 s instead of every 5-17 s
// (~5 ms of CPU each) and 3 MiB less RSS (BENCHMARKS.md, "GOGC 50 by default").
const gcPercent = 50

// defaultGCPercent applies gcPercent when the environment does not set
// GOGC (which the runtime has read already, and which wins).
func defaultGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
