from mongopat.cli import main

if __name__ == "__main__":  # not when a worker process started with "spawn" imports this module again
    main()
