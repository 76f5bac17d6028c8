package dev.holdfast.example.stock;

import dev.holdfast.testing.QuarkusRedisTestResource;

/** A real redis-server from holdfast-testing for the {@code @QuarkusTest}s. */
public class RedisTestResource extends QuarkusRedisTestResource {
}
