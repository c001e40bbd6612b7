package jvm

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/galago-project/galago/internal/hotspot"
	"github.com/galago-project/galago/internal/jmx"
	"github.com/galago-project/galago/internal/netns"
	"github.com/galago-project/galago/internal/probe/periodic"
	"github.com/galago-project/galago/internal/table"
)

// What only the JVM's platform MBeans know, read through its local JMX
// connector (see the package documentation).

// addressCounter is the hsperfdata string where a JVM publishes its local
// connector's address once its management agent runs.
const addressCounter = "sun.management.JMXConnectorServer.address"

// closeTimeout bounds the RMIConnection.close() at stop and at a JVM's
// exit.
const closeTimeout = time.Second

// bufPools are the buffer pools reported, in order.
var bufPools = []string{"direct", "mapped"}

// bufPool is one BufferPoolMXBean's values; -1 for an attribute not read.
type bufPool struct {
	count, used, capacity int64
}

// mbeanValues is one period's MBean reading of a JVM.
type mbeanValues struct {
	bufPools map[string]bufPool
	// coll is MemoryPoolMXBean.getCollectionUsage by pool, for the pools
	// that have one.
	coll map[string]usage
}

// jmxState is a JVM's JMX connection and what is known not to be there.
type jmxState struct {
	client *jmx.Client
	// off: given up for this JVM (its agent cannot be started); said once.
	off bool
	// noColl are the pools without a collection usage (a null
	// CollectionUsage, or no MBean of that name): not asked again.
	noColl map[string]bool
}

// dialIn dials from inside the network namespace of the process at proc:
// the local connector listens on that namespace's loopback.
func dialIn(proc string) jmx.DialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := netns.Do(filepath.Join(proc, "ns", "net"), func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		if err != nil && c != nil {
			c.Close()
			c = nil
		}
		return c, err
	}
}

// connect returns j's JMX client, starting the JVM's local management
// agent (ManagementAgent.start_local, idempotent) when it publishes no
// connector address yet; nil when JMX is unavailable.
func (p *Probe) connect(c periodic.Cycle, pid int, j *jvmState, pd *hotspot.PerfData) *jmx.Client {
	x := &j.jmx
	if x.client != nil || x.off {
		return x.client
	}
	url := pd.Strings[addressCounter]
	if url == "" {
		if j.attachErr != nil {
			x.off = true // said by noAttach
			return nil
		}
		// Not through p.jcmd: a failure here is said once, for this JVM.
		if _, err := j.att.Jcmd(p.ctx, "ManagementAgent.start_local"); err != nil {
			switch {
			case p.ctx.Err() != nil:
			case errors.Is(err, hotspot.ErrNoAttach):
				x.off = true
				noAttach(c, pid, j, err)
			default:
				p.jmxOff(c, pid, j, err)
			}
			return nil
		}
		pd2, err := hotspot.ReadPerfData(j.perfPath)
		if err != nil {
			if !gone(err) {
				c.RT.Error()
				c.WarnOnce("perf."+strconv.Itoa(pid), "jvm: unreadable hsperfdata", "pid", pid, "err", err)
			}
			return nil
		}
		if url = pd2.Strings[addressCounter]; url == "" {
			p.jmxOff(c, pid, j, errors.New("the management agent started but published no connector address ("+addressCounter+")"))
			return nil
		}
	}
	if _, err := jmx.ParseServiceURL(url); err != nil {
		p.jmxOff(c, pid, j, err)
		return nil
	}
	client, err := jmx.Dial(p.ctx, url, dialIn(j.att.Proc), p.attachTimeout)
	if err != nil {
		if p.ctx.Err() == nil {
			c.RT.Error()
			c.WarnOnce("jmx."+strconv.Itoa(pid), "jvm: JMX connection failed (retried every period, logged once per JVM)", "pid", pid, "err", err)
		}
		return nil
	}
	x.client = client
	return client
}

// jmxOff gives up JMX for j, saying so once.
func (p *Probe) jmxOff(c periodic.Cycle, pid int, j *jvmState, err error) {
	j.jmx.off = true
	c.RT.Error()
	c.RT.Logger().Warn("jvm: JMX unavailable: jvm_buf_pool and jvm_mem_pool's coll_* fields not reported for this JVM", "pid", pid, "err", err)
}

// readMBeans reads the buffer pools and the collection usage of pools
// (their JMX names); nil when JMX is unavailable or failed this period
// (the connection is then closed and dialled again next period).
func (p *Probe) readMBeans(c periodic.Cycle, pid int, j *jvmState, pd *hotspot.PerfData, pools []string) *mbeanValues {
	cl := p.connect(c, pid, j, pd)
	if cl == nil {
		return nil
	}
	v, err := readMBeans(p.ctx, cl, pools, j.jmx.noColl)
	if err != nil {
		j.closeJMX()
		if p.ctx.Err() == nil {
			c.RT.Error()
			c.WarnOnce("jmx."+strconv.Itoa(pid), "jvm: JMX read failed (retried every period, logged once per JVM)", "pid", pid, "err", err)
		}
		return nil
	}
	return v
}

// readMBeans asks cl for the buffer pools' and the pools' values; a pool
// found to have no collection usage is added to noColl. A remote
// exception for one MBean leaves its values out; any other error ends the
// reading.
func readMBeans(ctx context.Context, cl *jmx.Client, pools []string, noColl map[string]bool) (*mbeanValues, error) {
	v := &mbeanValues{bufPools: map[string]bufPool{}, coll: map[string]usage{}}
	var re *jmx.RemoteError
	for _, b := range bufPools {
		name := "java.nio:type=BufferPool,name=" + b
		bp := bufPool{-1, -1, -1}
		for _, a := range []struct {
			attr string
			dst  *int64
		}{{"Count", &bp.count}, {"MemoryUsed", &bp.used}, {"TotalCapacity", &bp.capacity}} {
			x, err := cl.GetAttribute(ctx, name, a.attr)
			if errors.As(err, &re) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if n, ok := jmx.Long(x); ok {
				*a.dst = n
			}
		}
		if bp != (bufPool{-1, -1, -1}) {
			v.bufPools[b] = bp
		}
	}
	for _, pool := range pools {
		if noColl[pool] {
			continue
		}
		x, err := cl.GetAttribute(ctx, "java.lang:type=MemoryPool,name="+pool, "CollectionUsage")
		if errors.As(err, &re) {
			noColl[pool] = true
			continue
		}
		if err != nil {
			return nil, err
		}
		m, ok := jmx.Composite(x)
		if !ok {
			noColl[pool] = true // null: a pool no collector manages
			continue
		}
		u := unknownUsage()
		for k, dst := range map[string]*int64{"used": &u.used, "committed": &u.committed, "max": &u.max, "init": &u.init} {
			if n, ok := jmx.Long(m[k]); ok {
				*dst = n
			}
		}
		v.coll[pool] = u
	}
	return v, nil
}

// closeJMX closes j's JMX connection, if any.
func (j *jvmState) closeJMX() {
	if j.jmx.client != nil {
		_ = j.jmx.client.CloseWithin(closeTimeout)
		j.jmx.client = nil
	}
}

// memPoolNames are the pools of a period's jvm_mem_pool records.
func memPoolNames(recs []*table.Record) []string {
	var out []string
	for _, r := range recs {
		if r.Table == table.JvmMemPool {
			out = append(out, r.Str("pool"))
		}
	}
	return out
}
