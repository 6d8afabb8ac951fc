package loadjob;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiter;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;

/**
 * Rate limit whose total rate (records per second over all source subtasks) is re-read from a
 * file once per second. A missing or unreadable file keeps the last rate; 0 pauses the source.
 * Each subtask gets total / parallelism.
 */
public final class FileRateLimiterStrategy<S extends SourceSplit> implements RateLimiterStrategy<S> {
    private static final long serialVersionUID = 1L;

    private final String path;
    private final double initialTotalRate;

    public FileRateLimiterStrategy(String path, double initialTotalRate) {
        this.path = path;
        this.initialTotalRate = initialTotalRate;
    }

    @Override
    public RateLimiter<S> createRateLimiter(int parallelism) {
        return new FileRateLimiter<>(path, initialTotalRate, Math.max(1, parallelism));
    }

    /**
     * Paces permits on a schedule without a thread of its own: a permit that is due later is a
     * future completed by the JDK's shared delayed executor.
     */
    static final class FileRateLimiter<S extends SourceSplit> implements RateLimiter<S> {
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

        @Override
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
