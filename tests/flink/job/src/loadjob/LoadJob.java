package loadjob;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * Load job for the real-Flink tests. No external systems; five job vertices:
 *
 * <pre>
 *   datagen-source --FORWARD--> cpu-map --FORWARD--> filter --HASH--> keyed-sum --REBALANCE--> discard-sink
 * </pre>
 *
 * The source's total rate (records per second over all its subtasks) is read from
 * {@code --rate-file} every second, so a test moves load without restarting the job. cpu-map
 * burns {@code --work} iterations per record, so its busy time follows the rate. Chaining is
 * broken on both sides of cpu-map, which makes it and filter vertices of their own. The uids
 * keep vertex ids stable across submissions.
 *
 * <p>{@code --sleep-micros} adds a wait per record in cpu-map (like a call to an external
 * service): it raises busy time without using CPU, so overload can be shown on a small machine.
 *
 * <p>{@code --source-rebalance true} makes the source → cpu-map edge REBALANCE, so cpu-map and
 * filter can be rescaled without the source. The datagen source keeps the number of splits it
 * started with, so source subtasks added by a rescale get no split and finish at once.
 *
 * <p>Arguments (all optional): --rate-file PATH --rate 100 --work 20000 --sleep-micros 0 --keys 1000
 * --p-source 2 --p-map 2 --p-agg 3 --p-sink 1 --max-parallelism 128 --checkpoint-ms 10000
 * --source-rebalance false --name flink-autoscale-load
 *
 * <p>One source for Flink 1.18 to 2.3: it avoids the APIs that moved or changed between 1.x and
 * 2.x. {@code ParameterTool} moved packages in 2.0, so the arguments are parsed here;
 * {@code open(OpenContext)} does not exist in 1.18 and {@code open(Configuration)} is gone in
 * 2.0, so KeyedSum gets its state on first use; the rate limiter API became generic in 2.x, see
 * {@link FileRateLimiterStrategy}; {@code DataGeneratorSource} is not in 1.18's flink-dist, so
 * the source is {@link RatedSequenceSource}, the same thing from parts every version has. The
 * one class that differs is {@code DiscardSink}: the Sink API changed at 1.19, so it comes from
 * {@code sink-1.18/} or {@code sink-1.19/} (prepare.sh picks by version).
 */
public final class LoadJob {

    private LoadJob() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> p = parseArgs(args);
        final String rateFile = p.getOrDefault("rate-file", "");
        final double rate = Double.parseDouble(p.getOrDefault("rate", "100"));
        final int work = Integer.parseInt(p.getOrDefault("work", "20000"));
        final long sleepMicros = Long.parseLong(p.getOrDefault("sleep-micros", "0"));
        final int keys = Integer.parseInt(p.getOrDefault("keys", "1000"));
        final int pSource = Integer.parseInt(p.getOrDefault("p-source", "2"));
        final int pMap = Integer.parseInt(p.getOrDefault("p-map", String.valueOf(pSource)));
        final int pAgg = Integer.parseInt(p.getOrDefault("p-agg", "3"));
        final int pSink = Integer.parseInt(p.getOrDefault("p-sink", "1"));
        final int maxParallelism = Integer.parseInt(p.getOrDefault("max-parallelism", "128"));
        final long checkpointMs = Long.parseLong(p.getOrDefault("checkpoint-ms", "10000"));
        final boolean sourceRebalance = Boolean.parseBoolean(p.getOrDefault("source-rebalance", "false"));
        final String name = p.getOrDefault("name", "flink-autoscale-load");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setMaxParallelism(maxParallelism);
        if (checkpointMs > 0) {
            env.enableCheckpointing(checkpointMs);
        }

        RatedSequenceSource source =
                new RatedSequenceSource(FileRateLimiterStrategy.create(rateFile, rate));

        DataStream<Long> generated =
                env.fromSource(source, WatermarkStrategy.noWatermarks(), "datagen-source")
                        .uid("datagen-source")
                        .setParallelism(pSource);
        if (sourceRebalance) {
            generated = generated.rebalance();
        }
        generated
                .map(new CpuMap(work, sleepMicros))
                .name("cpu-map")
                .uid("cpu-map")
                .setParallelism(pMap)
                .disableChaining()
                .filter(new DropTenth())
                .name("filter")
                .uid("filter")
                .setParallelism(pMap)
                .keyBy(new ModKey(keys))
                .process(new KeyedSum())
                .name("keyed-sum")
                .uid("keyed-sum")
                .setParallelism(pAgg)
                .sinkTo(DiscardSink.<Tuple2<Long, Long>>create())
                .name("discard-sink")
                .uid("discard-sink")
                .setParallelism(pSink);

        env.execute(name);
    }

    /** {@code --key value} pairs; a key without a value, or anything else, is an error. */
    static Map<String, String> parseArgs(String[] args) {
        Map<String, String> parsed = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --key value pairs, got: " + String.join(" ", args));
            }
            parsed.put(args[i].substring(2), args[i + 1]);
        }
        return parsed;
    }

    /**
     * Burns CPU per record (an LCG loop the JIT cannot drop) and optionally waits, so busy
     * time follows the rate.
     */
    public static final class CpuMap implements MapFunction<Long, Long> {
        private final int work;
        private final long sleepNanos;

        public CpuMap(int work, long sleepMicros) {
            this.work = work;
            this.sleepNanos = Math.max(0L, sleepMicros) * 1000L;
        }

        @Override
        public Long map(Long value) {
            long x = value;
            for (int i = 0; i < work; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
                x ^= (x >>> 29);
            }
            if (sleepNanos > 0) {
                long until = System.nanoTime() + sleepNanos;
                for (long left = sleepNanos; left > 0; left = until - System.nanoTime()) {
                    LockSupport.parkNanos(left);
                }
            }
            return value + (x & 1L);
        }
    }

    /** Drops one record in ten, so filter's output rate differs from its input rate. */
    public static final class DropTenth implements FilterFunction<Long> {
        @Override
        public boolean filter(Long value) {
            return value % 10 != 0;
        }
    }

    public static final class ModKey implements KeySelector<Long, Long> {
        private final int keys;

        public ModKey(int keys) {
            this.keys = keys;
        }

        @Override
        public Long getKey(Long value) {
            return value % keys;
        }
    }

    /**
     * Running (count, sum) per key in ValueState, so checkpoints and rescales move real state. The
     * state handle is taken on first use rather than in open(), whose signature differs between
     * 1.18 and 2.x.
     */
    public static final class KeyedSum extends KeyedProcessFunction<Long, Long, Tuple2<Long, Long>> {
        private transient ValueState<Tuple2<Long, Long>> acc;

        @Override
        public void processElement(Long value, Context ctx, Collector<Tuple2<Long, Long>> out) throws Exception {
            if (acc == null) {
                acc = getRuntimeContext()
                        .getState(new ValueStateDescriptor<>("acc", Types.TUPLE(Types.LONG, Types.LONG)));
            }
            Tuple2<Long, Long> a = acc.value();
            if (a == null) {
                a = Tuple2.of(0L, 0L);
            }
            a.f0 += 1;
            a.f1 += value;
            acc.update(a);
            out.collect(Tuple2.of(ctx.getCurrentKey(), a.f1));
        }
    }
}
