public class Burner {
    static long sink;
    static long spinHot(long n) {
        long x = n;
        for (int i = 0; i < 2000000; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= (x >>> 29);
        }
        return x;
    }
    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() < end) sink += spinHot(sink);
        System.out.println("ready");
        System.out.flush();
        for (;;) sink += spinHot(sink);
    }
}
