package loadjob;

import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimitedSourceReader;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;

/**
 * The numbers 0, 1, 2, ... at a rate set by a {@link RateLimiterStrategy}: what Flink's
 * {@code DataGeneratorSource} does with an identity generator, built from the parts that are in
 * {@code flink-dist} of every version from 1.18 on ({@code DataGeneratorSource} itself is not in
 * 1.18's). A FLIP-27 source: the enumerator makes one split per source subtask at the first
 * start and keeps those splits across restores, so subtasks added by a rescale get no split and
 * finish.
 */
@SuppressWarnings({"rawtypes", "unchecked"})
public final class RatedSequenceSource extends NumberSequenceSource {
    private static final long serialVersionUID = 1L;

    private final RateLimiterStrategy rate;

    public RatedSequenceSource(RateLimiterStrategy rate) {
        super(0L, Long.MAX_VALUE);
        this.rate = rate;
    }

    @Override
    public SourceReader<Long, NumberSequenceSplit> createReader(SourceReaderContext context) {
        return new RateLimitedSourceReader(
                super.createReader(context), rate.createRateLimiter(context.currentParallelism()));
    }
}
