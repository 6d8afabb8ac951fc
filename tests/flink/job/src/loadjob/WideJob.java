package loadjob;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * A wide job for the JobManager-cost benchmarks: many subtasks, little work, so the
 * JobManager's metric work dominates. {@code --vertices} job vertices (at least 4), all at
 * {@code --parallelism}; chaining is off, so every operator is a vertex of its own:
 *
 * <pre>
 *   datagen-source --FORWARD--> stage-1 --REBALANCE--> stage-2 --FORWARD--> ... --HASH--> stage-k --FORWARD--> ... discard-sink
 * </pre>
 *
 * Edges are FORWARD except two all-to-all ones: a REBALANCE after stage-1 and a HASH (keyBy)
 * into the middle stage, so the network stack has the all-to-all channels of a real job
 * without needing memory for more of them. The source's total rate is read from
 * {@code --rate-file} every second; {@code --sleep-micros} makes stage-1 wait per record
 * (busy time without CPU), so a rate step shows as load on one vertex.
 *
 * <p>Arguments are parsed here rather than with ParameterTool, whose package differs between
 * Flink 1.x and 2.x, so this class compiles against both: --rate-file PATH --rate 1000
 * --sleep-micros 0 --vertices 8 --parallelism 128 --max-parallelism 128 --checkpoint-ms 0
 * --name flink-autoscale-wide
 */
public final class WideJob {

    private WideJob() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> p = parse(args);
        final String rateFile = p.getOrDefault("rate-file", "");
        final double rate = Double.parseDouble(p.getOrDefault("rate", "1000"));
        final long sleepMicros = Long.parseLong(p.getOrDefault("sleep-micros", "0"));
        final int vertices = Integer.parseInt(p.getOrDefault("vertices", "8"));
        final int parallelism = Integer.parseInt(p.getOrDefault("parallelism", "128"));
        final int maxParallelism = Integer.parseInt(p.getOrDefault("max-parallelism", "128"));
        final long checkpointMs = Long.parseLong(p.getOrDefault("checkpoint-ms", "0"));
        final String name = p.getOrDefault("name", "flink-autoscale-wide");
        if (vertices < 4) {
            throw new IllegalArgumentException("--vertices must be at least 4, got " + vertices);
        }

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setMaxParallelism(maxParallelism);
        env.setParallelism(parallelism);
        env.disableOperatorChaining();
        if (checkpointMs > 0) {
            env.enableCheckpointing(checkpointMs);
        }

        // The same rate-limited sequence source as LoadJob, built from parts every version has.
        RatedSequenceSource source =
                new RatedSequenceSource(FileRateLimiterStrategy.create(rateFile, rate));
        DataStream<Long> stream =
                env.fromSource(source, WatermarkStrategy.noWatermarks(), "datagen-source")
                        .uid("datagen-source");
        // Stages 1 .. vertices-2 sit between the source and the sink.
        int stages = vertices - 2;
        int keyedStage = (stages + 1) / 2 + 1;
        for (int i = 1; i <= stages; i++) {
            if (i == 2) {
                stream = stream.rebalance();
            }
            String stage = "stage-" + i;
            if (i == keyedStage && i != 2) {
                stream = stream.keyBy(new ModKey()).map(new Pass(0)).name(stage).uid(stage);
            } else {
                stream = stream.map(new Pass(i == 1 ? sleepMicros : 0)).name(stage).uid(stage);
            }
        }
        stream.sinkTo(DiscardSink.<Long>create()).name("discard-sink").uid("discard-sink");
        env.execute(name);
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --key value pairs, got " + args[i]);
            }
            out.put(args[i].substring(2), args[++i]);
        }
        return out;
    }

    /** Passes records on, optionally after a wait (like a call to an external service). */
    public static final class Pass implements MapFunction<Long, Long> {
        private final long sleepNanos;

        public Pass(long sleepMicros) {
            this.sleepNanos = Math.max(0L, sleepMicros) * 1000L;
        }

        @Override
        public Long map(Long value) {
            if (sleepNanos > 0) {
                long until = System.nanoTime() + sleepNanos;
                for (long left = sleepNanos; left > 0; left = until - System.nanoTime()) {
                    LockSupport.parkNanos(left);
                }
            }
            return value;
        }
    }

    public static final class ModKey implements KeySelector<Long, Long> {
        @Override
        public Long getKey(Long value) {
            return value % 4096;
        }
    }
}
