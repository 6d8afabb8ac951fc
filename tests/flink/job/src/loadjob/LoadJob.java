package loadjob;

import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;
import org.apache.flink.util.ParameterTool;

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
 */
public final class LoadJob {

    private LoadJob() {}

    public static void main(String[] args) throws Exception {
        ParameterTool p = ParameterTool.fromArgs(args);
        final String rateFile = p.get("rate-file", "");
        final double rate = p.getDouble("rate", 100.0);
        final int work = p.getInt("work", 20000);
        final long sleepMicros = p.getLong("sleep-micros", 0L);
        final int keys = p.getInt("keys", 1000);
        final int pSource = p.getInt("p-source", 2);
        final int pMap = p.getInt("p-map", pSource);
        final int pAgg = p.getInt("p-agg", 3);
        final int pSink = p.getInt("p-sink", 1);
        final int maxParallelism = p.getInt("max-parallelism", 128);
        final long checkpointMs = p.getLong("checkpoint-ms", 10000L);
        final boolean sourceRebalance = p.getBoolean("source-rebalance", false);
        final String name = p.get("name", "flink-autoscale-load");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setMaxParallelism(maxParallelism);
        if (checkpointMs > 0) {
            env.enableCheckpointing(checkpointMs);
        }

        GeneratorFunction<Long, Long> sequence = index -> index;
        DataGeneratorSource<Long> source =
                new DataGeneratorSource<>(
                        sequence, Long.MAX_VALUE, new FileRateLimiterStrategy<>(rateFile, rate), Types.LONG);

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
                .sinkTo(new DiscardingSink<>())
                .name("discard-sink")
                .uid("discard-sink")
                .setParallelism(pSink);

        env.execute(name);
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

    /** Running (count, sum) per key in ValueState, so checkpoints and rescales move real state. */
    public static final class KeyedSum extends KeyedProcessFunction<Long, Long, Tuple2<Long, Long>> {
        private transient ValueState<Tuple2<Long, Long>> acc;

        @Override
        public void open(OpenContext ctx) {
            acc = getRuntimeContext()
                    .getState(new ValueStateDescriptor<>("acc", Types.TUPLE(Types.LONG, Types.LONG)));
        }

        @Override
        public void processElement(Long value, Context ctx, Collector<Tuple2<Long, Long>> out) throws Exception {
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
