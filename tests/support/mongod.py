"""What mongod itself returned, where the stand-ins of the test lanes return something else: the figures a
test compares mongopat's and the engines' answers with."""

# Sums of doubles as mongod 8.0 returned them: a compensated running sum, not a plain one (which gives
# 12820.760000000002, 1025.5700000000002 and 68202.95999999999) nor the correctly rounded one.
COMPENSATED_SUMS = [
    ([1022.68, 2045.36, 4090.72, 2045.36, 2045.36, 1571.28], 12820.759999999998),
    ([120.19, 624.96, 120.19, 160.23], 1025.57),
    ([2499.84, 833.28, 20790, 20790, 20790, 2499.84], 68202.96),
    ([1249.92, 624.96, 208.32], 2083.2000000000003),
]
