package loadjob;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * A sink that drops every record: Flink's own Sink-v2 {@code DiscardingSink}, in flink-dist
 * from 1.19 on. The 1.18 twin of this class is in {@code sink-1.18/}.
 */
public final class DiscardSink {
    private DiscardSink() {}

    public static <T> Sink<T> create() {
        return new DiscardingSink<>();
    }
}
