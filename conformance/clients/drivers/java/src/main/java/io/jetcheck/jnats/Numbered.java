package io.jetcheck.jnats;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Names numbered from 1 in the order first seen (a load record's subjects, its error classes): rows carry the
 * number, the record the list. Not synchronized: its owner guards it.
 */
final class Numbered {
    private final List<String> names = new ArrayList<>();
    private final Map<String, Long> numbers = new HashMap<>();

    /** The 1-based number of `name`, the next one when it is new. */
    long of(String name) {
        Long number = numbers.get(name);
        if (number == null) {
            names.add(name);
            number = (long) names.size();
            numbers.put(name, number);
        }
        return number;
    }

    /** The names so far, in number order (a copy). */
    List<String> names() {
        return new ArrayList<>(names);
    }
}
