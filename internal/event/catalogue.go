package event

import (
	"fmt"
	"strings"
)

// Language is event.desc_language: the language of event descriptions.
type Language string

// The languages of gala-gopher's event catalogue (event_multy_language.rc).
const (
	EnUS Language = "en_US"
	ZhCN Language = "zh_CN"
)

// Languages lists every language a Desc carries.
var Languages = []Language{EnUS, ZhCN}

// ParseLanguage checks a desc_language value. Empty means en_US: gala-gopher
// then keeps its built-in English texts.
func ParseLanguage(s string) (Language, error) {
	switch Language(s) {
	case "", EnUS:
		return EnUS, nil
	case ZhCN:
		return ZhCN, nil
	}
	return "", fmt.Errorf("desc_language %q: want en_US or zh_CN", s)
}

// Desc is one abnormal event a built-in probe raises: the entity and metric
// it is about and its description in each language. Both texts are printf
// formats taking the same arguments in the same order.
type Desc struct {
	Entity, Metric string
	EnUS, ZhCN     string
}

// Text is d's format in lang (en_US for an unknown language).
func (d *Desc) Text(lang Language) string {
	if lang == ZhCN {
		return d.ZhCN
	}
	return d.EnUS
}

// catalogue holds every Desc in declaration order; only define appends, and
// only while the package's variables are initialised.
var catalogue []*Desc

func define(entity, metric, enUS, zhCN string) *Desc {
	d := &Desc{Entity: entity, Metric: metric, EnUS: enUS, ZhCN: zhCN}
	catalogue = append(catalogue, d)
	return d
}

// Catalogue returns every event description, in declaration order.
func Catalogue() []*Desc { return append([]*Desc(nil), catalogue...) }

// Lookup finds the description of (entity, metric).
func Lookup(entity, metric string) (*Desc, bool) {
	for _, d := range catalogue {
		if d.Entity == entity && d.Metric == metric {
			return d, true
		}
	}
	return nil, false
}

// The catalogue: every event a built-in probe raises, one line each. A
// probe raises an event with New(t, <its Desc>, id, args...), so an event
// cannot exist without its two texts. The Chinese texts are gala-gopher's
// (res/event_multy_language.rc) where it has one, with the arguments galago
// passes; TestCatalogue checks both texts of every entry.
var (
	// baseinfo
	CPUTotalUsedPer = define("cpu", "total_used_per", "Too high cpu utilization(%.2f%%).", "过高的CPU占用率(%.2f%%)")
	MemUtil         = define("mem", "util", "Too high mem utilization(%.2f%%).", "内存使用率过高(%.2f%%).")
	MemSwapUtil     = define("mem", "swap_util", "Too high swap utilization(%.2f%%).", "swap内存使用率过高(%.2f%%).")
	FSIUsePer       = define("fs", "IUsePer", "Too many Inodes consumed(%d%%).", "Inode使用率过高(%d%%).")
	FSUsePer        = define("fs", "UsePer", "Too many Blocks used(%d%%).", "磁盘使用率过高(%d%%).")
	DiskUtil        = define("disk", "util", "Disk device saturated(%.2f%%).", "磁盘设备已饱和(%.2f%%).")
	NICTxDropped    = define("nic", "tx_dropped", "net device tx queue drops(%d).", "网卡设备tx队列有丢包(%d).")
	NICRxDropped    = define("nic", "rx_dropped", "net device rx queue drops(%d).", "网卡设备rx队列有丢包(%d).")
	NICTxErrs       = define("nic", "tx_errs", "net device tx queue errors(%d).", "网卡设备tx队列有错包(%d).")
	NICRxErrs       = define("nic", "rx_errs", "net device rx queue errors(%d).", "网卡设备rx队列有错包(%d).")

	// tcp
	TCPOOM          = define("tcp_link", "tcp_oom", "TCP out of memory(%d).", "TCP内存占用超过了系统设置的阈值(oom次数: %d).")
	TCPBacklogDrops = define("tcp_link", "backlog_drops", "TCP backlog queue drops(%d).", "TCP连接因backlog队列满导致了丢包(丢包次数: %d).")
	TCPFilterDrops  = define("tcp_link", "filter_drops", "TCP filter drops(%d).", "TCP连接经过过滤器发生了丢包(丢包数: %d).")
	TCPSkDrops      = define("tcp_link", "sk_drops", "Number of lost packets in the TCP protocol stack(%d).", "TCP连接在TCP协议栈丢包总数(%d).")
	TCPLostOut      = define("tcp_link", "lost_out", "Number of lost segments estimated by TCP congestion(%d).", "TCP拥塞估计的丢包数大于用户设置的丢包阈值(%d).")
	TCPSackedOut    = define("tcp_link", "sacked_out", "Number of out-of-order TCP packets (SACK) or number of repeated TCP ACKs (NO SACK)(%d).",
		"乱序包数(当开启SACK时)或者重复的ACK包数(当不启用SACK时)大于用户设置的丢包阈值(%d).")
	TCPSynSRTT = define("tcp_link", "syn_srtt_max", "TCP connection establish timed out(%d us).", "TCP建连超时(syn_srtt: %d us).")

	// socket
	EndpointListenDrop     = define("endpoint_tcp", "listendrop", "TCP listen drops(%d).", "TCP监听端口丢包(丢包数 %d).")
	EndpointAcceptOverflow = define("endpoint_tcp", "accept_overflow", "TCP accept queue overflow(%d).", "TCP全连接队列溢出(%d).")
	EndpointSynOverflow    = define("endpoint_tcp", "syn_overflow", "TCP syn queue overflow(%d).", "TCP半连接队列溢出(%d).")
	EndpointRetranSynacks  = define("endpoint_tcp", "retran_synacks", "TCP SYN/ACK retransmission occurs.(%d).", "TCP SYN/ACK信号的重传次数不为0(%d).")

	// io
	BlockLatency = define("block", "latency_req_max",
		"IO latency occurred.(Disk %s(%d:%d), COMM %s, PID %d, op: %s, datalen %d, drv_latency %d, dev_latency %d)",
		"IO操作有延迟(磁盘 %s(%d:%d), 进程名: %s, PID: %d, 操作: %s, 数据长度: %d, 驱动层时延: %d, 设备层时延: %d).")
	BlockError = define("block", "err_code",
		"IO errors occurred.(Disk %s(%d:%d), COMM %s, PID %d, op: %s, datalen %d, blk_err(%d) '%s', scsi_err(%d) '%s', timestamp %f)",
		"IO操作有误(磁盘 %s(%d:%d), 进程名: %s, PID: %d, 操作: %s, 数据长度: %d, 操作错误码(%d) '%s', scsi错误码(%d) '%s', 时间戳 %f).")

	// hw
	HWNicXmitTimeout = define("hw", "nic_xmit_timeout", "HW nic nic_xmit_timeout (dev: %s (%s), queue_index: %d)",
		"网卡硬件发送超时(设备: %s (%s), 发送队列: %d)")

	// ksli, postgre_sli (latency_thr)
	SLIExceeded = define("sli", "rtt_nsec", "Process(TID:%d, %s) SLI(%s:%d) exceed the threshold.",
		"进程(TID:%d, %s)的SLI(%s:%d)超过阈值.")
	// proc (proc_dns: names a process failed to resolve; gala-gopher's rc
	// file has no entry for it: the Chinese text is galago's)
	DNSErrorRatio = define("dns", "error_ratio", "Process(PID:%d) DNS error ratio(%.3f %%).", "进程(PID:%d) DNS解析错误率(%.3f %%).")

	// container (OOM kills per process, from mark_victim)
	ProcOOMKill = define("proc", "oom_kills", "Process(PID:%d, COMM:%s) killed by the OOM killer(oom_score_adj %d).",
		"进程(PID:%d, 进程名:%s)被OOM killer杀死(oom_score_adj %d).")
)

// BadArgs reports whether a rendered description shows that its arguments
// did not fit the format (fmt's "%!" markers).
func BadArgs(text string) bool { return strings.Contains(text, "%!") }
