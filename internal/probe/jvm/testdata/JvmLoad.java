import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.RandomAccessFile;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryUsage;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

// The jvm probe's privileged test program: JvmLoad <workers> <daemons>
// <gcs> <MiB>. It starts the threads (and two daemon threads deadlocked
// on two monitors), keeps <MiB> MiB reachable, calls System.gc() <gcs>
// times, prints "ready", then answers every line on stdin with its own
// ThreadMXBean's view: "threads <live> <daemon> <peak> <started>
// <deadlocked> <base-live> <base-started>" (base: before its threads).
// It also allocates direct buffers of DIRECT bytes and maps MAPPED bytes
// of a file (before its collections), and answers "pools" with its own
// BufferPoolMXBeans ("buf\t<name>\t<count>\t<used>\t<capacity>") and
// the CollectionUsage of its MemoryPoolMXBeans that have one
// ("coll\t<name>\t<used>\t<committed>\t<max>"), then "end"; "mem"
// with every MemoryPoolMXBean's usage and collection usage
// ("mem\t<name>\t<used>\t<committed>\t<max>\t<coll used>\t<coll
// committed>\t<coll max>", -2 for no collection usage) and every
// GarbageCollectorMXBean's count ("gc\t<name>\t<count>"), then "end".
public class JvmLoad {
    static final int[] DIRECT = {1000, 2000, 3000, 40960};
    static final int MAPPED = (3 << 20) + 100;
    static final List<byte[]> retained = new ArrayList<>();
    static final List<ByteBuffer> buffers = new ArrayList<>();

    static Thread parked(String name, boolean daemon, CountDownLatch stop) {
        Thread t = new Thread(() -> {
            try {
                stop.await();
            } catch (InterruptedException e) {
            }
        }, name);
        t.setDaemon(daemon);
        t.start();
        return t;
    }

    static Thread locker(String name, Object first, Object second, CountDownLatch both) {
        Thread t = new Thread(() -> {
            synchronized (first) {
                both.countDown();
                try {
                    both.await();
                } catch (InterruptedException e) {
                }
                synchronized (second) {
                    System.out.println("unreachable");
                }
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public static void main(String[] a) throws Exception {
        int workers = Integer.parseInt(a[0]), daemons = Integer.parseInt(a[1]);
        int gcs = Integer.parseInt(a[2]), mib = Integer.parseInt(a[3]);
        ThreadMXBean tb = ManagementFactory.getThreadMXBean();
        int baseLive = tb.getThreadCount();
        long baseStarted = tb.getTotalStartedThreadCount();
        CountDownLatch stop = new CountDownLatch(1);
        for (int i = 0; i < workers; i++) {
            parked("worker-" + i, false, stop);
        }
        for (int i = 0; i < daemons; i++) {
            parked("daemon-" + i, true, stop);
        }
        Object l1 = new Object(), l2 = new Object();
        CountDownLatch both = new CountDownLatch(2);
        locker("deadlock-1", l1, l2, both);
        locker("deadlock-2", l2, l1, both);
        for (int i = 0; i < mib; i++) {
            retained.add(new byte[1 << 20]);
        }
        for (int n : DIRECT) {
            buffers.add(ByteBuffer.allocateDirect(n));
        }
        File f = File.createTempFile("jvmload", ".map");
        f.deleteOnExit();
        try (RandomAccessFile raf = new RandomAccessFile(f, "rw")) {
            buffers.add(raf.getChannel().map(FileChannel.MapMode.READ_WRITE, 0, MAPPED));
        }
        for (int i = 0; i < gcs; i++) {
            System.gc();
        }
        while (tb.findDeadlockedThreads() == null) {
            Thread.sleep(10);
        }
        System.out.println("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.equals("pools")) {
                for (BufferPoolMXBean b : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
                    System.out.printf("buf\t%s\t%d\t%d\t%d%n", b.getName(), b.getCount(), b.getMemoryUsed(), b.getTotalCapacity());
                }
                for (MemoryPoolMXBean m : ManagementFactory.getMemoryPoolMXBeans()) {
                    MemoryUsage u = m.getCollectionUsage();
                    if (u != null) {
                        System.out.printf("coll\t%s\t%d\t%d\t%d%n", m.getName(), u.getUsed(), u.getCommitted(), u.getMax());
                    }
                }
                System.out.println("end");
                continue;
            }
            if (line.equals("mem")) {
                for (MemoryPoolMXBean m : ManagementFactory.getMemoryPoolMXBeans()) {
                    MemoryUsage u = m.getUsage(), c = m.getCollectionUsage();
                    if (c == null) {
                        System.out.printf("mem\t%s\t%d\t%d\t%d\t-2\t-2\t-2%n", m.getName(), u.getUsed(), u.getCommitted(), u.getMax());
                    } else {
                        System.out.printf("mem\t%s\t%d\t%d\t%d\t%d\t%d\t%d%n", m.getName(), u.getUsed(), u.getCommitted(), u.getMax(),
                                c.getUsed(), c.getCommitted(), c.getMax());
                    }
                }
                for (GarbageCollectorMXBean g : ManagementFactory.getGarbageCollectorMXBeans()) {
                    System.out.printf("gc\t%s\t%d%n", g.getName(), g.getCollectionCount());
                }
                System.out.println("end");
                continue;
            }
            long[] dl = tb.findDeadlockedThreads();
            System.out.printf("threads %d %d %d %d %d %d %d%n", tb.getThreadCount(), tb.getDaemonThreadCount(),
                    tb.getPeakThreadCount(), tb.getTotalStartedThreadCount(), dl == null ? 0 : dl.length,
                    baseLive, baseStarted);
        }
        stop.countDown();
        System.exit(retained.size() > 0 && buffers.size() > 0 ? 0 : 1);
    }
}
