package loadjob;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiter;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;

/**
 * Rate limit whose total rate (records per second over all source subtasks) is re-read from a
 * file once per second. A missing or unreadable file keeps the last rate; 0 pauses the source.
 * Each subtask gets total / parallelism.
 *
 * <p>Compiles against Flink 1.x and 2.x alike: on 1.x {@code RateLimiterStrategy} and
 * {@code RateLimiter} are plain interfaces whose limiter implements {@code acquire()}; on 2.x
 * they are generic over the split type and the limiter implements {@code acquire(int)} (with
 * {@code acquire()} a default that asks for one permit). The raw types and both methods below
 * satisfy both.
 */
@SuppressWarnings({"rawtypes", "unchecked"})
public final class FileRateLimiterStrategy implements RateLimiterStrategy {
    private static final long serialVersionUID = 1L;

    private final String path;
    private final double initialTotalRate;

    private FileRateLimiterStrategy(String path, double initialTotalRate) {
        this.path = path;
        this.initialTotalRate = initialTotalRate;
    }

    /** A strategy reading the total rate from {@code path}, {@code initialTotalRate} until then. */
    public static RateLimiterStrategy create(String path, double initialTotalRate) {
        return new FileRateLimiterStrategy(path, initialTotalRate);
    }

    @Override
    public RateLimiter createRateLimiter(int parallelism) {
        return new FileRateLimiter(path, initialTotalRate, Math.max(1, parallelism));
    }

    /**
     * Paces permits on a schedule without a thread of its own: a permit that is due later is a
     * future completed by the JDK's shared delayed executor.
     */
    static final class FileRateLimiter implements RateLimiter {
        private static final long SECOND_NANOS = TimeUnit.SECONDS.toNanos(1);
        /** Permits this close to due are granted at once; it keeps sub-millisecond waits out. */
        private static final long SLACK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
        /** After a stall (backpressure, pause) the source may catch up at most this much. */
        private static final long MAX_CATCH_UP_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
        private static final long PAUSED_RECHECK_MILLIS = 200;

        private final String path;
        private final int parallelism;
        private double totalRate;
        private long lastReadNanos;
        private long nextPermitNanos;

        FileRateLimiter(String path, double initialTotalRate, int parallelism) {
            this.path = path;
            this.parallelism = parallelism;
            this.totalRate = initialTotalRate;
            this.lastReadNanos = System.nanoTime() - SECOND_NANOS;
            this.nextPermitNanos = System.nanoTime();
        }

        /** Flink 1.x: one permit per record. (On 2.x this overrides the default.) */
        @Override
        public CompletionStage<Void> acquire() {
            return acquire(1);
        }

        /** Flink 2.x: {@code permits} records at once. */
        public synchronized CompletionStage<Void> acquire(int permits) {
            long now = System.nanoTime();
            refreshRate(now);
            double subtaskRate = totalRate / parallelism;
            if (!(subtaskRate > 0)) {
                return CompletableFuture.runAsync(
                                () -> {},
                                CompletableFuture.delayedExecutor(PAUSED_RECHECK_MILLIS, TimeUnit.MILLISECONDS))
                        .thenCompose(ignored -> acquire(permits));
            }
            long start = Math.max(nextPermitNanos, now - MAX_CATCH_UP_NANOS);
            nextPermitNanos = start + (long) (permits * SECOND_NANOS / subtaskRate);
            long wait = start - now;
            if (wait <= SLACK_NANOS) {
                return CompletableFuture.completedFuture(null);
            }
            return CompletableFuture.runAsync(
                    () -> {}, CompletableFuture.delayedExecutor(wait, TimeUnit.NANOSECONDS));
        }

        private void refreshRate(long now) {
            if (path.isEmpty() || now - lastReadNanos < SECOND_NANOS) {
                return;
            }
            lastReadNanos = now;
            try {
                String text = new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8).trim();
                double rate = Double.parseDouble(text);
                if (rate >= 0 && !Double.isInfinite(rate)) {
                    totalRate = rate;
                }
            } catch (IOException | NumberFormatException e) {
                // Keep the last rate: a test may be rewriting the file right now.
            }
        }
    }
}
