package loadjob;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;

/**
 * A sink that drops every record, for Flink 1.18, whose flink-dist has no Sink-v2
 * {@code DiscardingSink} and whose {@code Sink} creates writers from an {@code InitContext}
 * (1.19 added {@code WriterInitContext}; 2.0 removed {@code InitContext}). The 1.19+ twin of
 * this class is in {@code sink-1.19/}.
 */
public final class DiscardSink<T> implements Sink<T> {
    private static final long serialVersionUID = 1L;

    private DiscardSink() {}

    public static <T> Sink<T> create() {
        return new DiscardSink<>();
    }

    @Override
    public SinkWriter<T> createWriter(InitContext context) {
        return new SinkWriter<T>() {
            @Override
            public void write(T element, Context context) {}

            @Override
            public void flush(boolean endOfInput) {}

            @Override
            public void close() {}
        };
    }
}
