// Writes the serialization fixtures of the jmx tests on OpenJDK 17:
// java Ser objectname-jdk17.ser mixed-jdk17.ser
import java.io.*;
import java.util.*;
import java.util.concurrent.TimeUnit;
import javax.management.ObjectName;
public class Ser {
    public static void main(String[] a) throws Exception {
        ObjectOutputStream o = new ObjectOutputStream(new FileOutputStream(a[0]));
        o.writeObject(new ObjectName("java.nio:type=BufferPool,name=direct"));
        o.close();
        o = new ObjectOutputStream(new FileOutputStream(a[1]));
        Long shared = Long.valueOf(-42);
        o.writeInt(7);
        o.writeUTF("héllo\u0000𝄞");
        o.writeObject(shared);
        o.writeObject(shared);
        o.writeObject(new String[]{"a", "b\u00e9"});
        o.writeObject(new int[]{1, -2, 3});
        o.writeObject(new byte[]{1, 2, 3, 4});
        o.writeObject(TimeUnit.SECONDS);
        TreeMap<String,Object> m = new TreeMap<>();
        m.put("used", 123L); m.put("max", -1L); m.put("n", 5);
        o.writeObject(m);
        o.writeObject(new ArrayList<>(List.of("x", 1.5d, true)));
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 70000; i++) sb.append((char)('a' + i % 26));
        o.writeObject(sb.toString());
        o.writeObject(new IOException("boom"));
        o.writeObject(String.class);
        o.close();
    }
}
